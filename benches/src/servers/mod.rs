//! Peer echo servers (tokio, glommio) that corewire is compared against. Both speak the raw
//! length-prefixed echo protocol and, like corewire's server, print per-shard `stats` lines on
//! SIGTERM.

pub mod accept_mode;
pub mod glommio_echo;
pub mod tokio_echo;

use std::io::Write;

use crate::stats_line::ShardCounters;

/// Prints one `stats` line per shard to stdout and flushes (the process exits right after).
pub fn print_stats(counters: &[ShardCounters]) {
    let mut out = std::io::stdout().lock();
    for (i, c) in counters.iter().enumerate() {
        let _ = writeln!(out, "{}", c.snapshot(i).line());
    }
    let _ = out.flush();
}
