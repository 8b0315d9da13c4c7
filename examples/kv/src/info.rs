//! The INFO text: Redis 7.0's `# Section` / `field:value` layout and sections (server,
//! clients, memory, persistence, stats, replication, cpu, modules, errorstats, cluster,
//! keyspace, commandstats, latencystats) with totals over all shards, plus a `Shards`
//! section that lists each shard. Any number of sections may be asked for, by name (any
//! case), `default`, `all` or `everything`.

use std::fmt::Write;

use bytes::Bytes;

use crate::introspect::stats::CallStats;
use crate::reply::Reply;
use crate::store::ShardStats;

/// The Redis version this server claims compatibility with (clients gate features on it).
pub const COMPATIBLE_REDIS_VERSION: &str = "7.0.0";

/// Process-wide facts only the glue knows, snapshotted when INFO is answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerInfo {
    pub process_id: u32,
    pub tcp_port: u16,
    pub uptime_ms: u64,
    pub connected_clients: u64,
    pub total_connections_received: u64,
    pub rejected_connections: u64,
    /// Requests waiting in BLPOP / BRPOP.
    pub blocked_clients: u64,
    pub aof_enabled: bool,
    /// `--cluster-enabled`.
    pub cluster_enabled: bool,
    /// The I/O backend the shards run on (`io_uring` or `epoll`), Redis's
    /// `multiplexing_api` field.
    pub multiplexing_api: String,
    /// `uname -s -r -m`, as Redis's `os` field.
    pub os: String,
    pub maxclients: u64,
    pub maxmemory: u64,
    pub maxmemory_policy: String,
    /// Process CPU time from getrusage(RUSAGE_SELF), in microseconds.
    pub used_cpu_sys_us: u64,
    pub used_cpu_user_us: u64,
    /// A random id of this run (Redis's `run_id`).
    pub run_id: String,
    pub executable: String,
    pub config_file: String,
    /// The process's resident memory, from /proc (0 where unknown).
    pub used_memory_rss: u64,
    /// The heap's bytes as the allocator counts them (`crate::heap`): now, at its most and
    /// at start-up; `None` where the server runs without that allocator (then
    /// `used_memory` is the keyspace's estimate plus the connections' buffers).
    pub heap: Option<HeapBytes>,
    pub tracking_clients: u64,
    /// Clients in CLIENT PAUSE's wait and the like.
    pub server_time_usec: u64,
    /// `latency-tracking-info-percentiles`.
    pub latency_percentiles: Vec<f64>,
    /// `latency-tracking`.
    pub latency_tracking: bool,
    /// Whether a CLIENT PAUSE is in force.
    pub paused: bool,
    /// Scripts in the node's script cache (SCRIPT LOAD, EVAL).
    pub cached_scripts: u64,
    /// SAVE/BGSAVE state (INFO persistence's `rdb_` fields).
    pub rdb: crate::server::RdbInfo,
    /// The link to the master, on a replica.
    pub master_link: Option<crate::repl::MasterLinkInfo>,
    /// The master's replication state (`None`: the glue keeps none).
    pub replication: Option<crate::repl::ReplInfo>,
}

/// [`ServerInfo::heap`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HeapBytes {
    pub allocated: u64,
    pub peak: u64,
    pub startup: u64,
}

impl HeapBytes {
    /// The allocator's figures, where `corewire-kv`'s allocator is installed.
    pub fn now() -> Option<HeapBytes> {
        let allocated = crate::heap::allocated()?;
        Some(HeapBytes {
            allocated,
            peak: crate::heap::peak().max(allocated),
            startup: crate::heap::startup(),
        })
    }
}

/// One shard's part of INFO: the store's numbers and the glue's.
#[derive(Debug, Clone, Default)]
pub struct ShardPart {
    pub stats: ShardStats,
    pub calls: CallStats,
    /// Client tracking: keys tracked, (key, client) pairs, broadcast prefixes.
    pub tracking: [u64; 3],
    pub channels: Vec<Bytes>,
    pub patterns: Vec<Bytes>,
    pub shard_channels: Vec<Bytes>,
    /// The shard's connections' memory (their CLIENT LIST `tot-mem`, plus each one's task
    /// and the state around its session).
    pub clients_memory: u64,
}

impl ShardPart {
    /// The shard's reply to INFO: `[store stats, call stats, [tracking...], channels,
    /// patterns, shard channels, clients' memory]`. Only the merger reads it.
    pub fn to_reply(
        stats: Reply,
        calls: Reply,
        tracking: [u64; 3],
        pubsub: [Vec<Bytes>; 3],
        clients_memory: u64,
    ) -> Reply {
        let [channels, patterns, shard] = pubsub;
        let names = |names: Vec<Bytes>| Reply::Array(names.into_iter().map(Reply::Bulk).collect());
        Reply::Array(vec![
            stats,
            calls,
            Reply::Array(tracking.iter().map(|n| Reply::Integer(*n as i64)).collect()),
            names(channels),
            names(patterns),
            names(shard),
            Reply::Integer(clients_memory as i64),
        ])
    }

    pub fn from_reply(reply: &Reply) -> Option<ShardPart> {
        let Reply::Array(fields) = reply else {
            return None;
        };
        let [stats, calls, Reply::Array(tracking), channels, patterns, shard, Reply::Integer(clients)] =
            &fields[..]
        else {
            // A store's own stats alone (a server built without the glue's parts).
            return ShardStats::from_reply(reply).map(|stats| ShardPart {
                stats,
                ..ShardPart::default()
            });
        };
        let mut part = ShardPart {
            stats: ShardStats::from_reply(stats)?,
            ..ShardPart::default()
        };
        part.calls.merge_reply(calls);
        for (slot, value) in part.tracking.iter_mut().zip(tracking) {
            if let Reply::Integer(n) = value {
                *slot = *n as u64;
            }
        }
        let names = |reply: &Reply| match reply {
            Reply::Array(items) => items
                .iter()
                .filter_map(|item| match item {
                    Reply::Bulk(name) => Some(name.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        part.channels = names(channels);
        part.patterns = names(patterns);
        part.shard_channels = names(shard);
        part.clients_memory = *clients as u64;
        Some(part)
    }
}

/// What a section renders from.
struct Facts<'a> {
    server: &'a ServerInfo,
    shards: Vec<&'a ShardStats>,
    calls: CallStats,
    parts: &'a [ShardPart],
}

type SectionRenderer = fn(&mut String, &Facts<'_>);

/// Every section, in Redis's order, and whether `default` includes it.
const SECTIONS: [(&str, SectionRenderer, bool); 14] = [
    ("server", server_section, true),
    ("clients", clients_section, true),
    ("memory", memory_section, true),
    ("persistence", persistence_section, true),
    ("stats", stats_section, true),
    ("replication", replication_section, true),
    ("cpu", cpu_section, true),
    ("modules", modules_section, true),
    ("commandstats", commandstats_section, false),
    ("errorstats", errorstats_section, true),
    ("latencystats", latencystats_section, false),
    ("cluster", cluster_section, true),
    ("keyspace", keyspace_section, true),
    ("shards", shards_section, true),
];

/// Renders the requested sections: none means `default`; `all` is every section but
/// modules', `everything` all of them; unknown names are ignored, as in Redis. Each section
/// comes once, in Redis's order. `parts[i]` is shard `i`'s.
pub fn render(requested: &[Bytes], server: &ServerInfo, parts: &[ShardPart]) -> String {
    let is = |name: &Bytes, word: &str| name.eq_ignore_ascii_case(word.as_bytes());
    let everything = requested.iter().any(|n| is(n, "everything"));
    let all = everything || requested.iter().any(|n| is(n, "all"));
    let default = requested.is_empty() || requested.iter().any(|n| is(n, "default"));
    let mut calls = CallStats::default();
    for part in parts {
        let reply = part.calls.to_reply();
        calls.merge_reply(&reply);
    }
    let facts = Facts {
        server,
        shards: parts.iter().map(|p| &p.stats).collect(),
        calls,
        parts,
    };
    let mut out = String::new();
    for (name, render_section, in_default) in SECTIONS {
        let wanted = (all && (name != "modules" || everything))
            || (default && in_default)
            || requested.iter().any(|r| is(r, name));
        if wanted {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            render_section(&mut out, &facts);
        }
    }
    out
}

fn total(facts: &Facts<'_>, field: impl Fn(&ShardStats) -> u64) -> u64 {
    facts.shards.iter().map(|s| field(s)).sum()
}

// `write!` into a String cannot fail, hence the ignored results below.

fn server_section(out: &mut String, facts: &Facts<'_>) {
    let server = facts.server;
    let uptime_s = server.uptime_ms / 1000;
    let _ = write!(
        out,
        "# Server\r\n\
         redis_version:{COMPATIBLE_REDIS_VERSION}\r\n\
         redis_git_sha1:00000000\r\n\
         redis_git_dirty:0\r\n\
         redis_build_id:0\r\n\
         redis_mode:{}\r\n\
         os:{}\r\n\
         arch_bits:{}\r\n\
         monotonic_clock:POSIX clock_gettime\r\n\
         multiplexing_api:{}\r\n\
         atomicvar_api:c11-builtin\r\n\
         gcc_version:0.0.0\r\n\
         process_id:{}\r\n\
         process_supervised:no\r\n\
         run_id:{}\r\n\
         tcp_port:{}\r\n\
         server_time_usec:{}\r\n\
         uptime_in_seconds:{uptime_s}\r\n\
         uptime_in_days:{}\r\n\
         hz:10\r\n\
         configured_hz:10\r\n\
         lru_clock:{}\r\n\
         executable:{}\r\n\
         config_file:{}\r\n\
         io_threads_active:0\r\n\
         corewire_version:{}\r\n\
         shards:{}\r\n",
        if server.cluster_enabled {
            "cluster"
        } else {
            "standalone"
        },
        server.os,
        usize::BITS,
        server.multiplexing_api,
        server.process_id,
        server.run_id,
        server.tcp_port,
        server.server_time_usec,
        uptime_s / 86_400,
        (server.server_time_usec / 1_000_000) & ((1 << 24) - 1),
        server.executable,
        server.config_file,
        env!("CARGO_PKG_VERSION"),
        facts.shards.len(),
    );
}

fn clients_section(out: &mut String, facts: &Facts<'_>) {
    let server = facts.server;
    let _ = write!(
        out,
        "# Clients\r\n\
         connected_clients:{}\r\n\
         cluster_connections:0\r\n\
         maxclients:{}\r\n\
         client_recent_max_input_buffer:0\r\n\
         client_recent_max_output_buffer:0\r\n\
         blocked_clients:{}\r\n\
         tracking_clients:{}\r\n\
         clients_in_timeout_table:{}\r\n",
        server.connected_clients,
        server.maxclients,
        server.blocked_clients,
        server.tracking_clients,
        server.blocked_clients,
    );
}

fn memory_section(out: &mut String, facts: &Facts<'_>) {
    let server = facts.server;
    // `used_memory` is the allocator's count of the heap (`crate::heap`), as Redis's is;
    // without that allocator, the keyspace estimate `--maxmemory` limits (store/memory.rs)
    // plus the connections' buffers. `used_memory_dataset` is what the heap holds beyond the
    // start-up heap and the connections' buffers. Eviction looks at the keyspace estimate
    // only: the connections are not counted for it.
    let clients: u64 = facts.parts.iter().map(|p| p.clients_memory).sum();
    let estimate = total(facts, |s| s.used_memory) + clients;
    let heap = server.heap.unwrap_or(HeapBytes {
        allocated: estimate,
        peak: estimate,
        startup: 0,
    });
    let used = heap.allocated;
    let dataset = match server.heap {
        Some(heap) => heap.allocated.saturating_sub(heap.startup + clients),
        None => total(facts, |s| s.data_bytes),
    };
    let percent = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    let _ = write!(
        out,
        "# Memory\r\n\
         used_memory:{used}\r\n\
         used_memory_human:{}\r\n\
         used_memory_rss:{}\r\n\
         used_memory_rss_human:{}\r\n\
         used_memory_peak:{}\r\n\
         used_memory_peak_human:{}\r\n\
         used_memory_peak_perc:{:.2}%\r\n\
         used_memory_overhead:{}\r\n\
         used_memory_startup:{}\r\n\
         used_memory_dataset:{dataset}\r\n\
         used_memory_dataset_perc:{:.2}%\r\n\
         maxmemory:{}\r\n\
         maxmemory_human:{}\r\n\
         maxmemory_policy:{}\r\n\
         mem_fragmentation_ratio:{:.2}\r\n\
         mem_allocator:mimalloc\r\n\
         lazyfree_pending_objects:{}\r\n\
         lazyfreed_objects:{}\r\n\
         mem_not_counted_for_evict:{}\r\n\
         mem_clients_slaves:0\r\n\
         mem_clients_normal:{clients}\r\n\
         mem_aof_buffer:0\r\n\
         number_of_cached_scripts:{}\r\n\
         used_memory_keyspace:{}\r\n",
        human_bytes(used),
        server.used_memory_rss,
        human_bytes(server.used_memory_rss),
        heap.peak,
        human_bytes(heap.peak),
        percent(used, heap.peak),
        used.saturating_sub(dataset),
        heap.startup,
        percent(dataset, used),
        server.maxmemory,
        human_bytes(server.maxmemory),
        server.maxmemory_policy,
        if used == 0 {
            0.0
        } else {
            server.used_memory_rss as f64 / used as f64
        },
        total(facts, |s| s.lazyfree_pending_objects),
        total(facts, |s| s.lazyfreed_objects),
        clients,
        server.cached_scripts,
        // Not Redis's: the keyspace's estimate, what `--maxmemory` limits and evicts by.
        estimate - clients,
    );
}

/// Redis's `bytesToHuman`: two decimals and a B/K/M/G/T suffix (binary multiples).
fn human_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (size, unit) in UNITS {
        if bytes >= size {
            return format!("{:.2}{unit}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes}B")
}

/// Process CPU time as Redis prints it: seconds with six decimals. Per-thread and
/// children's times are not tracked, so the children fields read 0 as on a Redis that
/// never forked.
fn cpu_section(out: &mut String, facts: &Facts<'_>) {
    let server = facts.server;
    let seconds = |us: u64| format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
    let _ = write!(
        out,
        "# CPU\r\n\
         used_cpu_sys:{}\r\n\
         used_cpu_user:{}\r\n\
         used_cpu_sys_children:0.000000\r\n\
         used_cpu_user_children:0.000000\r\n",
        seconds(server.used_cpu_sys_us),
        seconds(server.used_cpu_user_us),
    );
}

fn persistence_section(out: &mut String, facts: &Facts<'_>) {
    let server = facts.server;
    // Redis's fields, over all shards: sizes and counts add up, a rewrite is in progress if
    // any shard's is, a status is `err` if any shard's is, times are the longest. The `rdb_`
    // fields are the node's (one dump for all shards); changes count since the last save.
    let aof = |f: fn(&crate::aof::AofStats) -> u64| total(facts, |s| f(&s.aof));
    let any = |f: fn(&crate::aof::AofStats) -> bool| facts.shards.iter().any(|s| f(&s.aof));
    let longest = |f: fn(&crate::aof::AofStats) -> i64| {
        facts.shards.iter().map(|s| f(&s.aof)).max().unwrap_or(-1)
    };
    let status = |ok: bool| if ok { "ok" } else { "err" };
    let rdb = &server.rdb;
    let _ = write!(
        out,
        "# Persistence\r\n\
         loading:0\r\n\
         async_loading:0\r\n\
         current_cow_peak:0\r\n\
         current_cow_size:0\r\n\
         current_cow_size_age:0\r\n\
         current_fork_perc:0.00\r\n\
         current_save_keys_processed:0\r\n\
         current_save_keys_total:0\r\n\
         rdb_changes_since_last_save:{}\r\n\
         rdb_bgsave_in_progress:{}\r\n\
         rdb_last_save_time:{}\r\n\
         rdb_last_bgsave_status:{}\r\n\
         rdb_last_bgsave_time_sec:{}\r\n\
         rdb_current_bgsave_time_sec:{}\r\n\
         rdb_saves:{}\r\n\
         rdb_last_cow_size:0\r\n\
         rdb_last_load_keys_expired:{}\r\n\
         rdb_last_load_keys_loaded:{}\r\n\
         aof_enabled:{}\r\n\
         aof_rewrite_in_progress:{}\r\n\
         aof_rewrite_scheduled:0\r\n\
         aof_last_rewrite_time_sec:{}\r\n\
         aof_current_rewrite_time_sec:{}\r\n\
         aof_last_bgrewrite_status:{}\r\n\
         aof_rewrites:{}\r\n\
         aof_rewrites_consecutive_failures:{}\r\n\
         aof_last_write_status:{}\r\n\
         aof_last_cow_size:0\r\n\
         module_fork_in_progress:0\r\n\
         module_fork_last_cow_size:0\r\n",
        total(facts, |s| s.dirty),
        u8::from(rdb.bgsave_in_progress),
        rdb.last_save_time,
        status(rdb.last_bgsave_ok),
        rdb.last_bgsave_time_sec,
        rdb.current_bgsave_time_sec,
        rdb.saves,
        rdb.last_load_keys_expired,
        rdb.last_load_keys_loaded,
        u8::from(server.aof_enabled),
        u8::from(any(|a| a.rewrite_in_progress)),
        longest(|a| a.last_rewrite_time_sec),
        longest(|a| a.current_rewrite_time_sec),
        status(!any(|a| !a.last_rewrite_ok)),
        aof(|a| a.rewrites),
        aof(|a| a.rewrites_consecutive_failures),
        status(!any(|a| !a.last_write_ok)),
    );
    if let Some(w) = rdb.last_walk {
        // Not Redis's: how the last save's walk shared the shards (`walk_pace.rs`).
        let _ = write!(
            out,
            "rdb_last_save_walk:holds={},hold_p99_us={},hold_max_us={},waits={},\
             wait_p50_us={},wait_p99_us={},wait_max_us={}\r\n",
            w.holds,
            w.hold_p99_us,
            w.hold_max_us,
            w.waits,
            w.wait_p50_us,
            w.wait_p99_us,
            w.wait_max_us,
        );
    }
    if server.aof_enabled {
        let _ = write!(
            out,
            "aof_current_size:{}\r\n\
             aof_base_size:{}\r\n\
             aof_pending_rewrite:0\r\n\
             aof_buffer_length:{}\r\n\
             aof_pending_bio_fsync:0\r\n\
             aof_delayed_fsync:0\r\n",
            aof(|a| a.current_size),
            aof(|a| a.base_size),
            aof(|a| a.buffer_length),
        );
    }
}

/// Distinct names over the shards' lists.
fn distinct(lists: impl Iterator<Item = Vec<Bytes>>) -> usize {
    let mut all: Vec<Bytes> = lists.flatten().collect();
    all.sort();
    all.dedup();
    all.len()
}

fn stats_section(out: &mut String, facts: &Facts<'_>) {
    let server = facts.server;
    let parts = facts.parts;
    let tracking = |i: usize| parts.iter().map(|p| p.tracking[i]).sum::<u64>();
    // Every shard knows every broadcast prefix: the most any shard has.
    let prefixes = parts.iter().map(|p| p.tracking[2]).max().unwrap_or(0);
    let sync = |f: fn(&crate::repl::ReplInfo) -> u64| server.replication.as_ref().map_or(0, f);
    let _ = write!(
        out,
        "# Stats\r\n\
         total_connections_received:{}\r\n\
         total_commands_processed:{}\r\n\
         instantaneous_ops_per_sec:{}\r\n\
         total_net_input_bytes:0\r\n\
         total_net_output_bytes:0\r\n\
         rejected_connections:{}\r\n\
         sync_full:{}\r\n\
         sync_partial_ok:{}\r\n\
         sync_partial_err:{}\r\n\
         expired_keys:{}\r\n\
         expired_stale_perc:0.00\r\n\
         expired_time_cap_reached_count:0\r\n\
         expire_cycle_cpu_milliseconds:0\r\n\
         evicted_keys:{}\r\n\
         evicted_clients:0\r\n\
         total_eviction_exceeded_time:0\r\n\
         current_eviction_exceeded_time:0\r\n\
         keyspace_hits:{}\r\n\
         keyspace_misses:{}\r\n\
         pubsub_channels:{}\r\n\
         pubsub_patterns:{}\r\n\
         pubsubshard_channels:{}\r\n\
         latest_fork_usec:0\r\n\
         total_forks:0\r\n\
         migrate_cached_sockets:0\r\n\
         slave_expires_tracked_keys:0\r\n\
         active_defrag_hits:0\r\n\
         active_defrag_misses:0\r\n\
         active_defrag_key_hits:0\r\n\
         active_defrag_key_misses:0\r\n\
         total_active_defrag_time:0\r\n\
         current_active_defrag_time:0\r\n\
         tracking_total_keys:{}\r\n\
         tracking_total_items:{}\r\n\
         tracking_total_prefixes:{prefixes}\r\n\
         unexpected_error_replies:0\r\n\
         total_error_replies:{}\r\n\
         dump_payload_sanitizations:0\r\n\
         total_reads_processed:0\r\n\
         total_writes_processed:0\r\n\
         io_threaded_reads_processed:0\r\n\
         io_threaded_writes_processed:0\r\n\
         reply_buffer_shrinks:0\r\n\
         reply_buffer_expands:0\r\n",
        server.total_connections_received,
        total(facts, |s| s.commands_processed),
        total(facts, |s| s.ops_per_sec),
        server.rejected_connections,
        sync(|r| r.sync_full),
        sync(|r| r.sync_partial_ok),
        sync(|r| r.sync_partial_err),
        total(facts, |s| s.expired_keys),
        total(facts, |s| s.evicted_keys),
        total(facts, |s| s.keyspace_hits),
        total(facts, |s| s.keyspace_misses),
        distinct(parts.iter().map(|p| p.channels.clone())),
        distinct(parts.iter().map(|p| p.patterns.clone())),
        distinct(parts.iter().map(|p| p.shard_channels.clone())),
        tracking(0),
        tracking(1),
        facts.calls.total_errors,
    );
}

/// The replication section: the master's state from the glue's snapshot, with a replica's
/// link fields (see [`crate::repl::MasterLinkInfo`]) in place of `role:master`.
fn replication_section(out: &mut String, facts: &Facts<'_>) {
    let mut master = String::new();
    match &facts.server.replication {
        Some(info) => info.render_master(&mut master),
        None => crate::repl::ReplInfo::default().render_master(&mut master),
    }
    match &facts.server.master_link {
        Some(link) => {
            let mut fields = String::new();
            link.write_info(&mut fields);
            out.push_str(&master.replacen("role:master\r\n", &fields, 1));
        }
        None => out.push_str(&master),
    }
}

fn modules_section(out: &mut String, _facts: &Facts<'_>) {
    out.push_str("# Modules\r\n");
}

fn commandstats_section(out: &mut String, facts: &Facts<'_>) {
    out.push_str("# Commandstats\r\n");
    let mut commands: Vec<_> = facts.calls.commands().collect();
    commands.sort_by_key(|&(name, _)| name);
    for (name, stat) in commands {
        if stat.calls == 0 && stat.rejected == 0 && stat.failed == 0 {
            continue;
        }
        let per_call = if stat.calls == 0 {
            0.0
        } else {
            stat.usec as f64 / stat.calls as f64
        };
        let _ = write!(
            out,
            "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},\
             failed_calls={}\r\n",
            stat.calls, stat.usec, stat.rejected, stat.failed
        );
    }
}

fn errorstats_section(out: &mut String, facts: &Facts<'_>) {
    out.push_str("# Errorstats\r\n");
    let mut codes: Vec<(&Bytes, &u64)> = facts.calls.errors.iter().collect();
    codes.sort();
    for (code, count) in codes {
        let _ = write!(
            out,
            "errorstat_{}:count={count}\r\n",
            String::from_utf8_lossy(code)
        );
    }
}

fn latencystats_section(out: &mut String, facts: &Facts<'_>) {
    out.push_str("# Latencystats\r\n");
    if !facts.server.latency_tracking {
        return;
    }
    let mut commands: Vec<_> = facts.calls.commands().collect();
    commands.sort_by_key(|&(name, _)| name);
    for (name, stat) in commands {
        let Some(histogram) = &stat.histogram else {
            continue;
        };
        let _ = write!(out, "latency_percentiles_usec_{name}:");
        for (i, percentile) in facts.server.latency_percentiles.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let value = histogram.value_at_quantile(percentile / 100.0) as f64 / 1000.0;
            let _ = write!(
                out,
                "p{}={value:.3}",
                crate::config::value::format_percentile(*percentile)
            );
        }
        out.push_str("\r\n");
    }
}

/// What `redis-cli --cluster` reads to tell a cluster node from a standalone one.
fn cluster_section(out: &mut String, facts: &Facts<'_>) {
    let _ = write!(
        out,
        "# Cluster\r\ncluster_enabled:{}\r\n",
        u8::from(facts.server.cluster_enabled)
    );
}

fn keyspace_section(out: &mut String, facts: &Facts<'_>) {
    out.push_str("# Keyspace\r\n");
    let keys = total(facts, |s| s.keys);
    // Redis lists only non-empty databases.
    if keys > 0 {
        let expires = total(facts, |s| s.expires);
        let _ = write!(
            out,
            "db0:keys={keys},expires={expires},avg_ttl={}\r\n",
            avg_ttl(&facts.shards, expires)
        );
    }
}

/// The shards' `avg_ttl` estimates, each weighed by its keys with a TTL.
fn avg_ttl(shards: &[&ShardStats], expires: u64) -> u64 {
    if expires == 0 {
        return 0;
    }
    let weighed: u128 = shards
        .iter()
        .map(|s| u128::from(s.avg_ttl_ms) * u128::from(s.expires))
        .sum();
    (weighed / u128::from(expires)) as u64
}

fn shards_section(out: &mut String, facts: &Facts<'_>) {
    out.push_str("# Shards\r\n");
    for (i, s) in facts.shards.iter().enumerate() {
        let _ = write!(
            out,
            "shard{i}:keys={},expires={},data_bytes={},hits={},misses={},commands={},expired={}",
            s.keys,
            s.expires,
            s.data_bytes,
            s.keyspace_hits,
            s.keyspace_misses,
            s.commands_processed,
            s.expired_keys,
        );
        if s.aof.enabled {
            let _ = write!(
                out,
                ",aof_current_size={},aof_base_size={},aof_rewrites={},aof_rewrite_in_progress={}",
                s.aof.current_size,
                s.aof.base_size,
                s.aof.rewrites,
                u8::from(s.aof.rewrite_in_progress),
            );
        }
        out.push_str("\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(stats: ShardStats) -> ShardPart {
        ShardPart {
            stats,
            ..ShardPart::default()
        }
    }

    fn stats(keys: u64, hits: u64) -> ShardPart {
        part(ShardStats {
            keys,
            expires: 1,
            keyspace_hits: hits,
            commands_processed: 10,
            ..ShardStats::default()
        })
    }

    #[test]
    fn rates_add_up_and_avg_ttl_weighs_by_keys_with_a_ttl() {
        let shard = |expires, avg_ttl_ms, ops_per_sec| {
            part(ShardStats {
                keys: 10,
                expires,
                avg_ttl_ms,
                ops_per_sec,
                ..ShardStats::default()
            })
        };
        let text = render(
            &[],
            &ServerInfo::default(),
            &[shard(1, 4_000, 30), shard(3, 8_000, 12), shard(0, 0, 0)],
        );
        assert!(text.contains("instantaneous_ops_per_sec:42\r\n"), "{text}");
        assert!(
            text.contains("db0:keys=30,expires=4,avg_ttl=7000\r\n"),
            "{text}"
        );
    }

    #[test]
    fn totals_and_per_shard_lines() {
        let server = ServerInfo {
            tcp_port: 6379,
            connected_clients: 3,
            ..ServerInfo::default()
        };
        let text = render(&[], &server, &[stats(2, 5), stats(3, 7)]);
        assert!(text.starts_with("# Server\r\nredis_version:7.0.0\r\n"));
        assert!(text.contains("\r\n\r\n# Clients\r\nconnected_clients:3\r\n"));
        assert!(text.contains("keyspace_hits:12\r\n"));
        assert!(text.contains("total_commands_processed:20\r\n"));
        assert!(text.contains("db0:keys=5,expires=2,avg_ttl=0\r\n"));
        assert!(text.contains("shard1:keys=3,expires=1,data_bytes=0,hits=7,"));
        assert!(text.ends_with("\r\n"));
        assert!(!text.ends_with("\r\n\r\n"));
    }

    #[test]
    fn section_selection() {
        let server = ServerInfo::default();
        let b = |s: &str| Bytes::from(s.to_owned());
        let text = render(&[b("KEYSPACE")], &server, &[part(ShardStats::default())]);
        assert_eq!(text, "# Keyspace\r\n");
        assert_eq!(render(&[b("nope")], &server, &[]), "");
        let default = render(&[], &server, &[]);
        assert!(default.contains("# Errorstats") && !default.contains("# Commandstats"));
        assert!(default.contains("master_repl_offset"));
        let all = render(&[b("cpu"), b("all")], &server, &[]);
        assert!(all.contains("# Commandstats") && !all.contains("# Modules"));
        assert_eq!(all.matches("used_cpu_user_children").count(), 1);
        assert!(render(&[b("everything")], &server, &[]).contains("# Modules"));
        let cpu = render(&[b("cpu"), b("sentinel")], &server, &[]);
        assert!(cpu.starts_with("# CPU") && !cpu.contains("used_memory"));
    }

    #[test]
    fn memory_and_cpu_fields() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(1536), "1.50K");
        assert_eq!(human_bytes(3 << 30), "3.00G");
        let server = ServerInfo {
            maxmemory: 1 << 20,
            maxmemory_policy: "allkeys-lru".into(),
            used_cpu_sys_us: 1_500_000,
            used_cpu_user_us: 42,
            ..ServerInfo::default()
        };
        let b = |s: &str| Bytes::from(s.to_owned());
        let text = render(&[b("memory"), b("CPU")], &server, &[]);
        assert!(text.contains("maxmemory:1048576\r\nmaxmemory_human:1.00M\r\n"));
        assert!(text.contains("maxmemory_policy:allkeys-lru\r\n"));
        let persistence = render(&[b("persistence")], &server, &[]);
        assert!(persistence.contains("rdb_bgsave_in_progress:0\r\n"));
        assert!(
            text.contains("\r\n\r\n# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.000042\r\n")
        );
    }
}
