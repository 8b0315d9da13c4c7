//! Peer echo servers (tokio, glommio, monoio) that corewire is compared against. All speak the
//! raw length-prefixed echo protocol (tokio also corewire's RPC framing, [`tokio_rpc`]) and,
//! like corewire's server, print per-shard `stats` lines on SIGTERM.

pub mod accept_mode;
pub mod glommio_echo;
pub mod monoio_echo;
pub mod tokio_echo;
pub mod tokio_rpc;

use std::io::Write;
use std::sync::Arc;

use crate::stats_line::ShardCounters;

/// Prints one `stats` line per shard to stdout and flushes (the process exits right after).
pub fn print_stats(counters: &[ShardCounters]) {
    let mut out = std::io::stdout().lock();
    for (i, c) in counters.iter().enumerate() {
        let _ = writeln!(out, "{}", c.snapshot(i).line());
    }
    let _ = out.flush();
}

/// For servers whose event loop cannot watch signals (monoio, the raw-ring floor): a helper
/// thread waits for SIGTERM or SIGINT, prints the stats lines and exits the process with 0.
/// The hook is installed before the caller listens, so an early SIGTERM is never lost.
pub fn exit_on_signal(
    name: &'static str,
    counters: Arc<Vec<ShardCounters>>,
) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])?;
    std::thread::Builder::new()
        .name(format!("{name}-signals"))
        .spawn(move || {
            let _ = signals.forever().next();
            print_stats(&counters);
            std::process::exit(0);
        })?;
    Ok(())
}
