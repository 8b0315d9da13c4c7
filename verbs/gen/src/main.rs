//! Regenerates corewire-verbs' committed bindings (`verbs/src/sys/bindings.rs`) from the
//! installed rdma-core headers, or checks that the committed file is what they give.
//!
//! ```text
//! cargo xtask gen-verbs           # write verbs/src/sys/bindings.rs
//! cargo xtask gen-verbs --check   # fail (and say how to fix it) when it differs
//! ```
//!
//! Needs what building corewire-verbs itself no longer needs: libclang (bindgen loads it at
//! run time) and rdma-core's headers and libraries (`libibverbs-dev`, `librdmacm-dev`,
//! `libclang-dev` on Debian; `cargo xtask setup` installs them). Both modes also check that
//! the installed libraries export every symbol of the table at the version it names.

mod symbols;
mod transform;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use symbols::SYMBOLS;

const HINT: &str = "the generator needs libclang and rdma-core's headers and libraries: \
                    `cargo xtask setup` installs them (libclang-dev, libibverbs-dev, \
                    librdmacm-dev on Debian)";

#[derive(Parser)]
#[command(
    name = "corewire-verbs-gen",
    about = "Regenerates verbs/src/sys/bindings.rs from the installed rdma-core headers"
)]
struct Cli {
    /// Write nothing; fail (and say how to fix it) when the committed file differs.
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    match run(Cli::parse().check) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("corewire-verbs-gen: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Where the committed bindings live.
fn output_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("verbs/gen is inside verbs/")
        .join("src/sys/bindings.rs")
}

fn run(check: bool) -> Result<(), String> {
    versions::check_installed()?;
    let generated = transform::transform(&bindgen_output()?, SYMBOLS)?;
    let path = output_path();
    if check {
        let committed = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        if committed != generated {
            return Err(format!(
                "{} is not what bindgen makes from the installed rdma-core headers ({}); \
                 regenerate it with `cargo xtask gen-verbs` and commit the result",
                path.display(),
                first_difference(&committed, &generated)
            ));
        }
        eprintln!(
            "corewire-verbs-gen: {} matches the installed headers",
            path.display()
        );
    } else {
        std::fs::write(&path, &generated)
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("corewire-verbs-gen: wrote {}", path.display());
    }
    Ok(())
}

/// Which line differs first, for the error message.
fn first_difference(committed: &str, generated: &str) -> String {
    let mut a = committed.lines();
    let mut b = generated.lines();
    for line in 1.. {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (None, None) => break,
            (x, y) => {
                return format!(
                    "line {line}: committed {:?}, generated {:?}",
                    x.unwrap_or("<end of file>"),
                    y.unwrap_or("<end of file>")
                )
            }
        }
    }
    "they differ in line endings".into()
}

fn bindgen_output() -> Result<String, String> {
    let names = SYMBOLS.iter().map(|s| s.name).collect::<Vec<_>>().join("|");
    let builder = bindgen::Builder::default()
        .header_contents(
            "corewire-verbs.h",
            "#include <infiniband/verbs.h>\n#include <rdma/rdma_cma.h>\n",
        )
        .allowlist_function(format!("^({names})$"))
        // The structs the safe layer and the inline calls use (verbs_context and the compat
        // port attributes for `ibv_query_port`, the kernel's access flags for the range that
        // `ibv_reg_mr` checks), and the headers' constants.
        .allowlist_type("ibv_.*|rdma_.*|verbs_context|_compat_ibv_port_attr|ib_uverbs_access_flags")
        .allowlist_var("IBV_.*|RDMA_.*")
        // pthread types are the one part of these structs whose layout differs between
        // 64-bit Linux targets: take the platform's from `libc`.
        .blocklist_type("pthread_mutex_t|pthread_cond_t|__pthread_.*|__atomic_wide_counter.*")
        .raw_line("pub use libc::{pthread_cond_t, pthread_mutex_t};")
        .default_enum_style(bindgen::EnumVariation::ModuleConsts)
        // Anonymous C enums (matched by their variant names): plain constants, not a
        // `_bindgen_ty_N` module whose number shifts with the headers.
        .constified_enum("IBV_.*|RDMA_.*")
        .prepend_enum_name(false)
        .derive_default(true)
        .no_default("pthread_.*")
        .layout_tests(true)
        .generate_comments(false)
        .merge_extern_blocks(true)
        .rust_target(bindgen::RustTarget::stable(82, 0).map_err(|e| format!("{e:?}"))?)
        .formatter(bindgen::Formatter::None);
    // bindgen panics (instead of returning an error) when libclang cannot be loaded.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let generated =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate()));
    std::panic::set_hook(default_hook);
    match generated {
        Ok(Ok(b)) => Ok(b.to_string()),
        Ok(Err(e)) => Err(format!("bindgen failed: {e}; {HINT}")),
        Err(_) => Err(format!("bindgen could not load libclang; {HINT}")),
    }
}

/// The installed libraries must export each symbol at the version the table names.
#[allow(unsafe_code)] // dlopen/dlvsym of the installed libraries
mod versions {
    use std::ffi::{c_void, CStr, CString};

    use crate::symbols::{Lib, SYMBOLS};

    pub fn check_installed() -> Result<(), String> {
        let mut missing = Vec::new();
        for lib in [Lib::Verbs, Lib::RdmaCm] {
            let handle = open(lib.soname())?;
            for s in SYMBOLS.iter().filter(|s| s.lib == lib) {
                let name = CString::new(s.name).expect("no NUL");
                let version = CString::new(s.version).expect("no NUL");
                // SAFETY: handle came from dlopen and is never closed; both strings are
                // NUL-terminated. Nothing is called through the address.
                let p = unsafe { libc::dlvsym(handle, name.as_ptr(), version.as_ptr()) };
                if p.is_null() {
                    missing.push(format!("{}@{} in {}", s.name, s.version, lib.soname()));
                }
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the installed rdma-core lacks symbols the table names: {}",
                missing.join(", ")
            ))
        }
    }

    fn open(soname: &str) -> Result<*mut c_void, String> {
        let c = CString::new(soname).expect("no NUL");
        // SAFETY: dlopen of a NUL-terminated name; the handle is kept for the process.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            // SAFETY: dlerror returns a NUL-terminated string (or NULL) describing the
            // failure of the dlopen above, on this thread.
            let why = unsafe {
                let e = libc::dlerror();
                if e.is_null() {
                    "unknown error".to_string()
                } else {
                    CStr::from_ptr(e).to_string_lossy().into_owned()
                }
            };
            return Err(format!("could not load {soname}: {why}; {}", crate::HINT));
        }
        Ok(handle)
    }
}
