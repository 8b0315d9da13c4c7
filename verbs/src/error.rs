//! The crate's error type: which rdma-core call failed and why, or which argument the safe
//! layer refused before calling into C.

use std::fmt;

/// Result alias for this crate.
pub type Result<T, E = VerbsError> = std::result::Result<T, E>;

/// An error from the verbs / rdma_cm layer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerbsError {
    /// An rdma-core call failed with `errno`.
    Call {
        /// The C function.
        call: &'static str,
        /// Its error number.
        errno: i32,
    },
    /// `ibv_reg_mr` failed with ENOMEM. Pinning memory counts against RLIMIT_MEMLOCK for
    /// non-root users, so this is almost always the locked-memory limit, not a lack of RAM.
    /// `limit` is the soft RLIMIT_MEMLOCK in bytes (`None` = unlimited or unknown).
    MemlockLimit {
        /// Bytes the registration asked for.
        len: usize,
        /// The soft RLIMIT_MEMLOCK.
        limit: Option<u64>,
    },
    /// No RDMA device (with that name) exists.
    NoDevice {
        /// The name asked for (`None`: any device).
        name: Option<String>,
    },
    /// A scatter/gather range lies outside its memory region.
    InvalidRange {
        /// Where the range starts in the region.
        offset: usize,
        /// Its length.
        len: usize,
        /// The region's length.
        region_len: usize,
    },
    /// A work request has more scatter/gather entries than the queue allows.
    TooManySges {
        /// Entries in the request.
        given: usize,
        /// Entries the queue allows.
        max: usize,
    },
    /// An inline send is larger than the QP's `max_inline_data`.
    InlineTooLarge {
        /// Bytes of the send.
        len: usize,
        /// The queue pair's `max_inline_data`.
        max: u32,
    },
    /// rdma_cm private data longer than the CM message can carry.
    PrivateDataTooLong {
        /// Bytes given.
        len: usize,
        /// Bytes the message can carry.
        max: usize,
    },
    /// The memory region belongs to another protection domain than the queue.
    ForeignProtectionDomain,
    /// The protection domain was created on another device context than the rdma_cm id's
    /// (`rdma_create_qp` needs the PD from `Context::from_cm_id`).
    DeviceMismatch,
    /// The rdma_cm id has no device yet: bind it or resolve an address first.
    NotBound,
    /// `post_recv` on a QP whose receives come from a shared receive queue.
    UsesSrq,
    /// An argument out of range (the string says which).
    InvalidArgument(&'static str),
    /// The memory allocation backing a memory region failed.
    Alloc {
        /// Bytes asked for.
        len: usize,
    },
    /// rdma-core's `library` (`libibverbs.so.1` or `librdmacm.so.1`) could not be loaded at
    /// run time, or lacks a function this crate needs; `reason` is the loader's.
    LibraryUnavailable {
        /// The library.
        library: crate::sys::Library,
        /// The loader's message.
        reason: Box<str>,
    },
}

impl VerbsError {
    /// The OS error number, for errors that come from an rdma-core call.
    pub fn errno(&self) -> Option<i32> {
        match self {
            VerbsError::Call { errno, .. } => Some(*errno),
            VerbsError::MemlockLimit { .. } => Some(libc::ENOMEM),
            _ => None,
        }
    }

    /// The error of a failed rdma-core `call`, from the thread's `errno`.
    pub(crate) fn last(call: &'static str) -> Self {
        VerbsError::Call {
            call,
            errno: last_errno(),
        }
    }

    /// Maps a failed `ibv_reg_mr` to the memlock error when it is ENOMEM.
    pub(crate) fn from_reg_mr(errno: i32, len: usize, memlock_limit: Option<u64>) -> Self {
        if errno == libc::ENOMEM {
            VerbsError::MemlockLimit {
                len,
                limit: memlock_limit,
            }
        } else {
            VerbsError::Call {
                call: "ibv_reg_mr",
                errno,
            }
        }
    }
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerbsError::Call { call, errno } => {
                write!(
                    f,
                    "{call} failed: {}",
                    std::io::Error::from_raw_os_error(*errno)
                )
            }
            VerbsError::MemlockLimit { len, limit } => {
                write!(f, "ibv_reg_mr of {len} bytes failed with ENOMEM: ")?;
                match limit {
                    Some(l) => write!(f, "RLIMIT_MEMLOCK is {l} bytes")?,
                    None => write!(
                        f,
                        "RLIMIT_MEMLOCK is unlimited (the system is out of memory?)"
                    )?,
                }
                write!(
                    f,
                    "; registered memory is pinned and counts against it: raise `ulimit -l` \
                     or register less"
                )
            }
            VerbsError::NoDevice { name: Some(n) } => write!(f, "no RDMA device named {n:?}"),
            VerbsError::NoDevice { name: None } => write!(f, "no RDMA device found"),
            VerbsError::InvalidRange {
                offset,
                len,
                region_len,
            } => write!(
                f,
                "range {offset}..{offset}+{len} is outside the memory region ({region_len} bytes)"
            ),
            VerbsError::TooManySges { given, max } => {
                write!(f, "{given} scatter/gather entries, the queue allows {max}")
            }
            VerbsError::InlineTooLarge { len, max } => {
                write!(
                    f,
                    "inline send of {len} bytes exceeds max_inline_data {max}"
                )
            }
            VerbsError::PrivateDataTooLong { len, max } => {
                write!(f, "{len} bytes of rdma_cm private data, at most {max} fit")
            }
            VerbsError::ForeignProtectionDomain => write!(
                f,
                "memory region belongs to another protection domain than the queue"
            ),
            VerbsError::DeviceMismatch => write!(
                f,
                "protection domain is on another device context than the rdma_cm id \
                 (use Context::from_cm_id)"
            ),
            VerbsError::NotBound => write!(
                f,
                "rdma_cm id has no device yet (bind_addr or resolve_addr first)"
            ),
            VerbsError::UsesSrq => write!(
                f,
                "the queue pair receives through a shared receive queue: post there"
            ),
            VerbsError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            VerbsError::Alloc { len } => write!(f, "could not allocate {len} bytes"),
            VerbsError::LibraryUnavailable { library, reason } => write!(
                f,
                "RDMA needs rdma-core's {}, which could not be loaded ({reason}); install it \
                 ({})",
                library.name(),
                crate::sys::loader::INSTALL_HINT
            ),
        }
    }
}

impl std::error::Error for VerbsError {}

impl From<VerbsError> for std::io::Error {
    fn from(e: VerbsError) -> Self {
        match e.errno() {
            Some(errno) => std::io::Error::new(
                std::io::Error::from_raw_os_error(errno).kind(),
                e.to_string(),
            ),
            None if matches!(e, VerbsError::LibraryUnavailable { .. }) => {
                std::io::Error::new(std::io::ErrorKind::Unsupported, e.to_string())
            }
            None => std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()),
        }
    }
}

pub(crate) fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// rdma-core calls report failure three ways: 0 = ok, a positive errno value (the post and
/// notify calls), or -1 with `errno` set. Some providers return `-errno`.
pub(crate) fn check_ret(call: &'static str, rc: i32) -> Result<()> {
    match rc {
        0 => Ok(()),
        -1 => Err(VerbsError::last(call)),
        rc => Err(VerbsError::Call {
            call,
            errno: rc.abs(),
        }),
    }
}

/// The soft RLIMIT_MEMLOCK in bytes, `None` when unlimited or unknown.
pub(crate) fn memlock_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the rlimit struct we pass, which lives on our stack.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    (rc == 0 && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enomem_on_registration_names_the_memlock_limit() {
        let e = VerbsError::from_reg_mr(libc::ENOMEM, 1 << 26, Some(8 << 20));
        assert_eq!(
            e,
            VerbsError::MemlockLimit {
                len: 1 << 26,
                limit: Some(8 << 20)
            }
        );
        let msg = e.to_string();
        assert!(msg.contains("RLIMIT_MEMLOCK is 8388608 bytes"), "{msg}");
        assert!(msg.contains("ulimit -l"), "{msg}");
        assert_eq!(e.errno(), Some(libc::ENOMEM));
    }

    #[test]
    fn other_registration_errors_stay_plain_call_errors() {
        let e = VerbsError::from_reg_mr(libc::EINVAL, 10, None);
        assert_eq!(
            e,
            VerbsError::Call {
                call: "ibv_reg_mr",
                errno: libc::EINVAL
            }
        );
        assert!(e.to_string().starts_with("ibv_reg_mr failed: "));
    }

    #[test]
    fn return_codes_map_to_errno() {
        assert_eq!(check_ret("x", 0), Ok(()));
        assert_eq!(
            check_ret("ibv_post_send", libc::ENOMEM),
            Err(VerbsError::Call {
                call: "ibv_post_send",
                errno: libc::ENOMEM
            })
        );
        assert_eq!(
            check_ret("y", -libc::EAGAIN).unwrap_err().errno(),
            Some(libc::EAGAIN)
        );
    }

    #[test]
    fn io_error_conversion_keeps_kind_and_message() {
        let e: std::io::Error = VerbsError::Call {
            call: "rdma_bind_addr",
            errno: libc::EADDRINUSE,
        }
        .into();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
        assert!(e.to_string().contains("rdma_bind_addr"));
    }
}
