//! Loading rdma-core at run time: `dlopen` of `libibverbs.so.1` and `librdmacm.so.1` the first
//! time RDMA is used, and one `dlvsym` per function of the table ([`Fns`]), each at the
//! symbol version whose signature the bindings were generated from. The libraries stay
//! loaded for the rest of the process (device objects and providers point into them).
//!
//! A host without rdma-core gets [`VerbsError::LibraryUnavailable`] from the first call that
//! needs it, naming the library and the packages that provide it; nothing else in the
//! process depends on it.

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;
use std::sync::OnceLock;

use super::Fns;
use crate::error::VerbsError;

/// The shared libraries the table comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Library {
    /// `libibverbs.so.1`: devices, protection domains, memory regions, queues.
    Verbs,
    /// `librdmacm.so.1`: the connection manager.
    RdmaCm,
}

impl Library {
    /// The name `dlopen` is given.
    pub fn soname(self) -> &'static CStr {
        match self {
            Library::Verbs => c"libibverbs.so.1",
            Library::RdmaCm => c"librdmacm.so.1",
        }
    }

    /// The same, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Library::Verbs => "libibverbs.so.1",
            Library::RdmaCm => "librdmacm.so.1",
        }
    }
}

/// The packages that provide the libraries, for error messages.
pub const INSTALL_HINT: &str = "on Debian/Ubuntu: apt-get install libibverbs1 librdmacm1 \
                                ibverbs-providers; on Fedora/RHEL: dnf install libibverbs \
                                librdmacm";

static LOADED: OnceLock<Result<Fns, VerbsError>> = OnceLock::new();

/// Loads rdma-core's libraries and resolves the table, once per process; later calls return
/// the first outcome. Every safe constructor that needs rdma-core calls it first.
pub fn load() -> Result<(), VerbsError> {
    loaded().map(|_| ())
}

pub(crate) fn loaded() -> Result<&'static Fns, VerbsError> {
    LOADED.get_or_init(open).as_ref().map_err(Clone::clone)
}

/// Opens the libraries (librdmacm needs libibverbs, so that one first) and resolves every
/// symbol.
fn open() -> Result<Fns, VerbsError> {
    let verbs = Handle::open(Library::Verbs)?;
    let cm = Handle::open(Library::RdmaCm)?;
    // SAFETY: every address comes from dlvsym of the library and symbol version the bindings
    // were generated for (verbs/gen checks each against the installed library, and takes
    // the signature from the headers' declaration), so it is that function with the
    // declared C signature.
    unsafe {
        Fns::resolve(|lib, name, version| {
            let handle = match lib {
                Library::Verbs => verbs,
                Library::RdmaCm => cm,
            };
            handle.symbol(lib, name, version)
        })
    }
}

/// A `dlopen` handle, never closed.
#[derive(Clone, Copy)]
struct Handle(NonNull<c_void>);

impl Handle {
    fn open(lib: Library) -> Result<Handle, VerbsError> {
        Handle::open_file(lib.soname(), lib)
    }

    /// Opens `file`, reporting a failure as `lib` missing.
    fn open_file(file: &CStr, lib: Library) -> Result<Handle, VerbsError> {
        // SAFETY: dlopen of a NUL-terminated name. RTLD_LOCAL keeps the symbols out of the
        // global namespace; the providers libibverbs loads find it through their own
        // DT_NEEDED entry, as for a linked program.
        let h = unsafe { libc::dlopen(file.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        NonNull::new(h)
            .map(Handle)
            .ok_or_else(|| VerbsError::LibraryUnavailable {
                library: lib,
                reason: dl_error().into(),
            })
    }

    fn symbol(
        self,
        lib: Library,
        name: &'static CStr,
        version: &'static CStr,
    ) -> Result<NonNull<c_void>, VerbsError> {
        // SAFETY: a live handle and NUL-terminated strings; the address is only stored.
        #[cfg(target_env = "gnu")]
        let p = unsafe { libc::dlvsym(self.0.as_ptr(), name.as_ptr(), version.as_ptr()) };
        // Without symbol versioning (musl) the only symbol is the default one.
        // SAFETY: as above.
        #[cfg(not(target_env = "gnu"))]
        let p = unsafe { libc::dlsym(self.0.as_ptr(), name.as_ptr()) };
        NonNull::new(p).ok_or_else(|| VerbsError::LibraryUnavailable {
            library: lib,
            reason: format!(
                "it has no {}@{} ({}): this rdma-core is older than the one corewire-verbs \
                 was built for",
                name.to_string_lossy(),
                version.to_string_lossy(),
                dl_error()
            )
            .into(),
        })
    }
}

// SAFETY: a dlopen handle is a process-wide reference that any thread may use.
unsafe impl Send for Handle {}
// SAFETY: as for Send; dlvsym takes the loader's own lock.
unsafe impl Sync for Handle {}

/// The calling thread's last dl* error.
fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by the loader, valid
    // until the next dl* call on this thread; it is copied before that.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "no error reported".to_string()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_named_with_the_packages_to_install() {
        let err = match Handle::open_file(c"libcorewire-no-such-library.so.1", Library::Verbs) {
            Ok(_) => panic!("a library that does not exist was opened"),
            Err(e) => e,
        };
        let msg = err.to_string();
        assert!(msg.contains("libibverbs.so.1"), "{msg}");
        assert!(msg.contains("libcorewire-no-such-library.so.1"), "{msg}");
        assert!(
            msg.contains("apt-get install libibverbs1 librdmacm1 ibverbs-providers"),
            "{msg}"
        );
    }

    #[test]
    fn a_missing_symbol_says_rdma_core_is_too_old() {
        // libc is loaded in every process: it has no verbs symbols.
        let libc = Handle::open_file(c"libc.so.6", Library::Verbs).expect("libc.so.6 is loaded");
        let err = libc
            .symbol(Library::Verbs, c"ibv_open_device", c"IBVERBS_1.1")
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("ibv_open_device@IBVERBS_1.1"), "{msg}");
        assert!(msg.contains("older"), "{msg}");
    }
}
