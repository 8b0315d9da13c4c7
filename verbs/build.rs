//! Generates `sys` bindings from the system's rdma-core headers and compiles the C shim for
//! the calls that are `static inline` there. Generating at build time (instead of committing
//! bindings) keeps struct layouts in step with whatever rdma-core is installed.

use std::env;
use std::path::{Path, PathBuf};
use std::process::exit;

const SETUP_HINT: &str = "run `cargo xtask setup` (it installs libclang-dev, libibverbs-dev, \
                          librdmacm-dev, pkg-config and build-essential on Debian)";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let csrc = manifest_dir.join("csrc");
    for f in ["wrapper.h", "shim.h", "shim.c"] {
        println!("cargo:rerun-if-changed=csrc/{f}");
    }
    println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");

    let include_paths = link_rdma_core();
    compile_shim(&csrc, &include_paths);
    generate_bindings(&csrc, &include_paths, &out_dir.join("sys.rs"));
}

fn fail(what: &str) -> ! {
    eprintln!("\nerror: corewire-verbs: {what}\n  {SETUP_HINT}\n");
    exit(1);
}

/// Emits link flags for libibverbs + librdmacm; returns extra include dirs.
fn link_rdma_core() -> Vec<PathBuf> {
    let mut includes = Vec::new();
    let mut found_both = true;
    for lib in ["libibverbs", "librdmacm"] {
        match pkg_config::Config::new().probe(lib) {
            Ok(l) => includes.extend(l.include_paths),
            Err(e) => {
                println!(
                    "cargo:warning=pkg-config {lib} failed ({e}); linking -l{} directly",
                    &lib[3..]
                );
                found_both = false;
            }
        }
    }
    if !found_both {
        // Without the .pc files (e.g. PKG_CONFIG unavailable) the libraries usually still sit
        // in the default linker path.
        println!("cargo:rustc-link-lib=ibverbs");
        println!("cargo:rustc-link-lib=rdmacm");
    }
    includes
}

fn compile_shim(csrc: &Path, includes: &[PathBuf]) {
    let mut build = cc::Build::new();
    build.file(csrc.join("shim.c")).include(csrc).warnings(true);
    for i in includes {
        build.include(i);
    }
    if let Err(e) = build.try_compile("corewire_verbs_shim") {
        fail(&format!(
            "could not compile csrc/shim.c ({e}); a C compiler and the rdma-core headers \
             (<infiniband/verbs.h>, <rdma/rdma_cma.h>) are needed"
        ));
    }
}

fn generate_bindings(csrc: &Path, includes: &[PathBuf], out: &Path) {
    let builder = bindgen::Builder::default()
        .header(csrc.join("wrapper.h").to_string_lossy())
        .clang_arg(format!("-I{}", csrc.display()))
        .clang_args(includes.iter().map(|i| format!("-I{}", i.display())))
        .allowlist_function("ibv_.*|rdma_.*|corewire_.*")
        .allowlist_type("ibv_.*|rdma_.*")
        .allowlist_var("IBV_.*|RDMA_.*")
        // These are ABI-compat symbols behind macros: calling them directly would use the
        // wrong struct layout (ibv_query_port) or skip flag handling (ibv_reg_mr). The shim
        // versions go through the macros.
        .blocklist_function("ibv_query_port|ibv_reg_mr")
        .blocklist_function("__ibv_.*|___ibv_.*")
        .default_enum_style(bindgen::EnumVariation::ModuleConsts)
        // Anonymous C enums (matched by their variant names): plain constants, not a
        // `_bindgen_ty_N` module whose number shifts with the headers.
        .constified_enum("IBV_.*|RDMA_.*")
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .merge_extern_blocks(true)
        .formatter(bindgen::Formatter::Rustfmt)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    // bindgen panics (instead of returning an error) when libclang cannot be loaded: turn that
    // into the setup hint rather than a backtrace.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let generated =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate()));
    std::panic::set_hook(default_hook);
    let bindings = match generated {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => fail(&format!(
            "bindgen failed on csrc/wrapper.h: {e}\n  (missing <infiniband/verbs.h> or \
             <rdma/rdma_cma.h> means libibverbs-dev / librdmacm-dev are not installed)"
        )),
        Err(_) => fail(
            "bindgen could not load libclang (set LIBCLANG_PATH if it is installed in an \
             unusual place)",
        ),
    };
    if let Err(e) = bindings.write_to_file(out) {
        fail(&format!("writing {}: {e}", out.display()));
    }
}
