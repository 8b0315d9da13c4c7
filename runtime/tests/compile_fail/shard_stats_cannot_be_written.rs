// Only the runtime writes a shard's counters: users read them through getters, and a
// snapshot is plain data they cannot build (so a counter added later breaks no one).
use corewire_runtime::{with_local_stats, ShardStatsSnapshot};

fn main() {
    with_local_stats(|s| s.protocol_errors.incr());
    let _ = ShardStatsSnapshot {
        protocol_errors: 1,
        ..Default::default()
    };
    // What works instead:
    let _: u64 = with_local_stats(|s| s.protocol_errors());
}
