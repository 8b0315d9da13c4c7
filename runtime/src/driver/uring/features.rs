//! Kernel feature probing. The host runs 6.x, the RDMA test VM runs Debian's 6.1: set-up flags
//! are tried from the most to the least capable, and each opcode the runtime may use is probed.

use std::io;

use io_uring::{opcode, register::Probe, IoUring};

/// What the kernel under this shard's ring supports.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Features {
    /// IORING_SETUP_SINGLE_ISSUER (6.0): only the shard thread submits.
    pub single_issuer: bool,
    /// IORING_SETUP_DEFER_TASKRUN (6.1): completions are posted only when the shard asks.
    pub defer_taskrun: bool,
    /// IORING_SETUP_COOP_TASKRUN (5.19): no IPI to interrupt the shard for task work.
    pub coop_taskrun: bool,
    /// Multishot accept (5.19): one armed accept per listener; else one accept at a time.
    pub accept_multishot: bool,
    /// IORING_OP_MSG_RING (5.18): shards wake each other by posting a completion into the
    /// parked shard's ring; else by writing its eventfd.
    pub msg_ring: bool,
    /// IORING_OP_SEND/RECV (5.6).
    pub send_recv: bool,
    /// IORING_ENTER_EXT_ARG (5.11): park with a timeout without a timeout SQE.
    pub ext_arg: bool,
    /// IORING_OP_STATX (5.6): `fs` metadata through the ring; else on a helper thread.
    pub statx: bool,
    /// IORING_OP_UNLINKAT (5.11): `fs::remove_file`/`remove_dir`; else a helper thread.
    pub unlinkat: bool,
    /// IORING_OP_RENAMEAT (5.11): `fs::rename`; else a helper thread.
    pub renameat: bool,
    /// IORING_OP_MKDIRAT (5.15): `fs::create_dir(_all)`; else a helper thread.
    pub mkdirat: bool,
    /// IORING_OP_FTRUNCATE (6.9): `File::set_len`; else a helper thread.
    pub ftruncate: bool,
    /// Multishot receive (6.0) into the shard's provided-buffer ring (5.19), registered at
    /// start-up; else one single-shot receive at a time into the stream's own buffer.
    pub recv_multishot: bool,
    /// Bundled multishot receive (IORING_RECVSEND_BUNDLE, 6.10): one completion carries
    /// whatever arrived, over as many ring buffers as it fills, where a plain multishot
    /// receive posts one completion (one `tcp_recvmsg`) per buffer. Off with
    /// `COREWIRE_IO_URING=nobundle` (or `plain`).
    pub recv_bundle: bool,
    /// IORING_OP_SEND_ZC (6.0): zero-copy sends above `RuntimeBuilder::send_zc_threshold`.
    pub send_zc: bool,
    /// Multishot poll (5.13): `io::ReadableEvents` keeps one poll armed; else it re-arms a
    /// single-shot poll after each wake-up.
    pub poll_multishot: bool,
}

/// Whether `COREWIRE_IO_URING=plain` asks for every fallback: no set-up flags, and none of
/// the optional mechanisms (buffer ring, multishot receive and accept, zero-copy send,
/// MSG_RING wake-ups), as on an old kernel.
pub(crate) fn forced_plain() -> bool {
    std::env::var("COREWIRE_IO_URING").as_deref() == Ok("plain")
}

pub(crate) fn build_ring(entries: u32) -> io::Result<(IoUring, Features)> {
    type Setup = fn(&mut io_uring::Builder);
    let attempts: [(Setup, bool, bool, bool); 3] = [
        (
            |b| {
                b.setup_single_issuer()
                    .setup_defer_taskrun()
                    .setup_taskrun_flag();
            },
            true,
            true,
            false,
        ),
        (
            |b| {
                b.setup_coop_taskrun().setup_taskrun_flag();
            },
            false,
            false,
            true,
        ),
        (|_| {}, false, false, false),
    ];
    // COREWIRE_IO_URING=coop|plain skips the more capable set-ups (to compare them, to test
    // the fallbacks, or to work around a kernel whose DEFER_TASKRUN misbehaves); `plain` also
    // turns off every optional mechanism (see `forced_plain`).
    let skip = match std::env::var("COREWIRE_IO_URING").as_deref() {
        Ok("coop") => 1,
        Ok("plain") => 2,
        _ => 0,
    };
    let mut last_err = None;
    for (setup, single_issuer, defer_taskrun, coop_taskrun) in attempts.into_iter().skip(skip) {
        let mut builder = IoUring::builder();
        builder.setup_cqsize(entries * 4);
        setup(&mut builder);
        match builder.build(entries) {
            Ok(ring) => {
                let mut probe = Probe::new();
                let probed = ring.submitter().register_probe(&mut probe).is_ok();
                let has = |code: u8| probed && probe.is_supported(code);
                let features = Features {
                    single_issuer,
                    defer_taskrun,
                    coop_taskrun: coop_taskrun || defer_taskrun,
                    // Multishot accept shares ACCEPT's opcode, so it cannot be probed directly;
                    // SEND_ZC arrived in 6.0, after multishot accept (5.19).
                    accept_multishot: has(opcode::Accept::CODE)
                        && has(opcode::SendZc::CODE)
                        && !forced_plain(),
                    msg_ring: has(opcode::MsgRingData::CODE) && !forced_plain(),
                    send_recv: has(opcode::Send::CODE) && has(opcode::Recv::CODE),
                    ext_arg: ring.params().is_feature_ext_arg(),
                    statx: has(opcode::Statx::CODE),
                    unlinkat: has(opcode::UnlinkAt::CODE),
                    renameat: has(opcode::RenameAt::CODE),
                    mkdirat: has(opcode::MkDirAt::CODE),
                    ftruncate: has(opcode::Ftruncate::CODE),
                    // RECV_MULTISHOT shares RECV's opcode; SEND_ZC arrived with it in 6.0.
                    recv_multishot: has(opcode::SendZc::CODE) && !forced_plain(),
                    recv_bundle: ring.params().is_feature_recvsend_bundle()
                        && has(opcode::SendZc::CODE)
                        && !forced_plain()
                        && std::env::var("COREWIRE_IO_URING").as_deref() != Ok("nobundle"),
                    send_zc: has(opcode::SendZc::CODE) && !forced_plain(),
                    // Multishot poll shares POLL_ADD's opcode; MKDIRAT (5.15) came after it.
                    poll_multishot: has(opcode::MkDirAt::CODE) && !forced_plain(),
                };
                if !features.send_recv || !features.ext_arg {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "corewire needs io_uring SEND/RECV and EXT_ARG (Linux 5.11 or newer)",
                    ));
                }
                return Ok((ring, features));
            }
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::other("io_uring set-up failed")))
}

/// `what` failed with `e`: the log line's message, naming RLIMIT_MEMLOCK where that is what
/// the kernel ran out of.
pub(crate) fn why_not(what: &str, e: &io::Error) -> String {
    if e.raw_os_error() == Some(libc::ENOMEM) {
        format!("{what}: {}", crate::driver::backend_memlock_note())
    } else {
        what.to_string()
    }
}
