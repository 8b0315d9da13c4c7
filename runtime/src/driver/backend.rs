//! Which backend a runtime runs on, chosen once when it starts: asked for in
//! `RuntimeBuilder::backend`, overridden by the operator with `COREWIRE_BACKEND`, and for
//! `Auto` decided by the first shard's attempt to set up its ring (the later shards take
//! what it got). No probe ring on the builder's thread: a ring a thread set up and dropped
//! leaves io_uring state on that thread, whose task work can interrupt its timed socket
//! reads with EINTR.

use std::fmt;
use std::io;

/// The I/O backend of a runtime's shards (`RuntimeBuilder::backend`, `Runtime::backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Backend {
    /// io_uring where the kernel allows it, else epoll (the default).
    #[default]
    Auto,
    /// io_uring, or fail to start (with the reason).
    IoUring,
    /// epoll and non-blocking syscalls; file operations on the blocking pool.
    Epoll,
}

impl Backend {
    /// `"auto"`, `"io_uring"` or `"epoll"`: the name `COREWIRE_BACKEND` takes and the
    /// metrics label shows.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::IoUring => "io_uring",
            Backend::Epoll => "epoll",
        }
    }

    /// Parse a name as `COREWIRE_BACKEND` takes it (`io-uring` and `uring` also mean
    /// io_uring).
    pub fn from_name(name: &str) -> Option<Backend> {
        match name.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Some(Backend::Auto),
            "io_uring" | "io-uring" | "uring" | "iouring" => Some(Backend::IoUring),
            "epoll" => Some(Backend::Epoll),
            _ => None,
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The operator's override of the backend the program asked for.
pub(crate) const ENV: &str = "COREWIRE_BACKEND";

/// The backend asked for (`Auto` still open) and by whom, for the log line and errors.
#[derive(Debug, Clone)]
pub(crate) struct Wanted {
    pub backend: Backend,
    pub by: String,
}

/// The backend for a runtime: `asked` (the builder's), unless `COREWIRE_BACKEND` overrides
/// it (an unknown value is an error).
pub(crate) fn select(asked: Backend) -> io::Result<Wanted> {
    let (backend, by) = match std::env::var(ENV) {
        Ok(v) => match Backend::from_name(&v) {
            Some(b) => (b, format!("{ENV}={v}")),
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{ENV}={v}: expected auto, io_uring or epoll"),
                ))
            }
        },
        Err(_) => (asked, "RuntimeBuilder::backend".to_string()),
    };
    Ok(Wanted { backend, by })
}

/// What a shard got: `io_uring` tried first where `wanted` allows it, epoll where it asked
/// for epoll or (`Auto`) where io_uring cannot start. `try_uring` sets up the io_uring
/// driver; `epoll` the epoll one. Returns the driver and why it is that backend; a forced
/// `IoUring` that cannot start is an error naming why.
pub(crate) fn open<D>(
    wanted: &Wanted,
    try_uring: impl FnOnce() -> io::Result<D>,
    epoll: impl FnOnce() -> io::Result<D>,
) -> io::Result<(D, String)> {
    let by = &wanted.by;
    match wanted.backend {
        Backend::Epoll => Ok((epoll()?, format!("asked for by {by}"))),
        Backend::IoUring => match try_uring() {
            Ok(d) => Ok((d, format!("asked for by {by}"))),
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => Err(explain(&e)),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!(
                    "{} (io_uring asked for by {by}; {ENV}=epoll or Backend::Auto runs on epoll)",
                    describe(&e)
                ),
            )),
        },
        Backend::Auto => match try_uring() {
            Ok(d) => Ok((d, "io_uring set up".to_string())),
            Err(e) if falls_back(&e) => Ok((epoll()?, format!("{}; using epoll", describe(&e)))),
            Err(e) => Err(explain(&e)),
        },
    }
}

/// Errors of io_uring_setup that mean "not here" rather than "something broke".
fn falls_back(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS | libc::EPERM | libc::EACCES | libc::ENOMEM)
    ) || e.kind() == io::ErrorKind::Unsupported
}

/// What an io_uring set-up error means, for a person.
pub(crate) fn describe(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSYS) => {
            "io_uring_setup: ENOSYS — the kernel has no io_uring (before 5.1, or built without it)"
                .to_string()
        }
        Some(libc::EPERM) => {
            "io_uring_setup: EPERM — blocked by seccomp or kernel.io_uring_disabled".to_string()
        }
        Some(libc::EACCES) => {
            "io_uring_setup: EACCES — denied by a security module (SELinux, AppArmor)".to_string()
        }
        Some(libc::ENOMEM) => format!("io_uring_setup: ENOMEM — {}", memlock_note()),
        _ if e.kind() == io::ErrorKind::Unsupported => format!("io_uring: {e}"),
        _ => format!("io_uring set-up failed: {e}"),
    }
}

/// An io_uring error with what it means (and what limits it) in its message.
pub(crate) fn explain(e: &io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::InvalidInput {
        // A setting of ours (the receive-buffer sizes), already explained.
        return io::Error::new(e.kind(), e.to_string());
    }
    io::Error::new(e.kind(), describe(e))
}

/// RLIMIT_MEMLOCK, and whether this kernel charges io_uring's rings and registrations
/// against it (before 5.12; later kernels charge the memory cgroup).
pub(crate) fn memlock_note() -> String {
    let limit = memlock_limit()
        .map(|b| {
            if b == libc::RLIM_INFINITY {
                "unlimited".to_string()
            } else {
                format!("{} KiB", b / 1024)
            }
        })
        .unwrap_or_else(|| "unknown".to_string());
    if kernel_charges_memlock() {
        format!(
            "RLIMIT_MEMLOCK is {limit}, and this kernel (before 5.12) charges io_uring's rings \
             and registered buffers to it: raise it (ulimit -l, LimitMEMLOCK=, \
             --ulimit memlock=)"
        )
    } else {
        format!("out of memory for the ring (RLIMIT_MEMLOCK is {limit})")
    }
}

fn memlock_limit() -> Option<libc::rlim_t> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass, nothing else.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    (rc == 0).then_some(lim.rlim_cur)
}

/// Whether the running kernel is older than 5.12 (io_uring memory charged to memlock).
pub(crate) fn kernel_charges_memlock() -> bool {
    kernel_version().is_some_and(|v| v < (5, 12))
}

fn kernel_version() -> Option<(u32, u32)> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    parse_release(&release)
}

fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// What limits the set-up of a runtime on `backend`, for its start-up line: the locked
/// memory limit where the kernel charges io_uring's registrations to it.
pub(crate) fn limits(backend: Backend) -> Option<String> {
    (backend == Backend::IoUring && kernel_charges_memlock()).then(memlock_note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_parse() {
        for b in [Backend::Auto, Backend::IoUring, Backend::Epoll] {
            assert_eq!(Backend::from_name(b.name()), Some(b));
        }
        assert_eq!(Backend::from_name(" EPOLL\n"), Some(Backend::Epoll));
        assert_eq!(Backend::from_name("io-uring"), Some(Backend::IoUring));
        assert_eq!(Backend::from_name("kqueue"), None);
    }

    #[test]
    fn set_up_errors_say_what_they_mean() {
        let eperm = describe(&io::Error::from_raw_os_error(libc::EPERM));
        assert_eq!(
            eperm,
            "io_uring_setup: EPERM — blocked by seccomp or kernel.io_uring_disabled"
        );
        assert!(falls_back(&io::Error::from_raw_os_error(libc::ENOSYS)));
        assert!(falls_back(&io::Error::from_raw_os_error(libc::EACCES)));
        assert!(falls_back(&io::Error::new(
            io::ErrorKind::Unsupported,
            "too old"
        )));
        assert!(!falls_back(&io::Error::from_raw_os_error(libc::EMFILE)));
        assert!(describe(&io::Error::from_raw_os_error(libc::ENOMEM)).contains("RLIMIT_MEMLOCK"));
    }

    #[test]
    fn auto_falls_back_and_forced_io_uring_says_why() {
        let eperm = || Err::<&str, _>(io::Error::from_raw_os_error(libc::EPERM));
        let wanted = |backend| Wanted {
            backend,
            by: "a test".into(),
        };
        let (got, why) = open(&wanted(Backend::Auto), eperm, || Ok("epoll")).unwrap();
        assert_eq!(got, "epoll");
        assert_eq!(
            why,
            "io_uring_setup: EPERM — blocked by seccomp or kernel.io_uring_disabled; using epoll"
        );
        let err = open(&wanted(Backend::IoUring), eperm, || Ok("epoll")).unwrap_err();
        assert!(
            err.to_string().contains("EPERM — blocked by seccomp"),
            "{err}"
        );
        assert!(err.to_string().contains("COREWIRE_BACKEND=epoll"), "{err}");
        let (got, _) = open(&wanted(Backend::Epoll), || Ok("uring"), || Ok("epoll")).unwrap();
        assert_eq!(got, "epoll");
        // A broken set-up that is not "io_uring is not allowed here" is not hidden by epoll.
        let emfile = || Err::<&str, _>(io::Error::from_raw_os_error(libc::EMFILE));
        assert!(open(&wanted(Backend::Auto), emfile, || Ok("epoll")).is_err());
    }

    #[test]
    fn kernel_releases_parse() {
        assert_eq!(parse_release("6.1.0-18-amd64\n"), Some((6, 1)));
        assert_eq!(parse_release("5.11.22"), Some((5, 11)));
        assert_eq!(parse_release("garbage"), None);
    }
}
