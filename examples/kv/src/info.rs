//! The INFO text: Redis's `# Section` / `field:value` layout, with totals over all shards plus
//! a `Shards` section that lists each shard.

use std::fmt::Write;

use bytes::Bytes;

use crate::store::ShardStats;

/// The Redis version this server claims compatibility with (clients gate features on it).
pub const COMPATIBLE_REDIS_VERSION: &str = "7.0.0";

/// Process-wide facts only the glue knows, snapshotted when INFO is answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// `uname -s -r -m`, as Redis's `os` field.
    pub os: String,
    pub maxclients: u64,
    pub maxmemory: u64,
    pub maxmemory_policy: String,
    /// Process CPU time from getrusage(RUSAGE_SELF), in microseconds.
    pub used_cpu_sys_us: u64,
    pub used_cpu_user_us: u64,
    /// Scripts in the node's script cache (SCRIPT LOAD, EVAL).
    pub cached_scripts: u64,
}

type SectionRenderer = fn(&mut String, &ServerInfo, &[ShardStats]);

const SECTIONS: [(&str, SectionRenderer); 9] = [
    ("server", server_section),
    ("clients", clients_section),
    ("memory", memory_section),
    ("persistence", persistence_section),
    ("stats", stats_section),
    ("cpu", cpu_section),
    ("cluster", cluster_section),
    ("keyspace", keyspace_section),
    ("shards", shards_section),
];

/// Renders the requested sections (case-insensitive; none, `default`, `all` or `everything`
/// mean all of them; unknown names are ignored, as in Redis). `shards[i]` is shard `i`.
pub fn render(requested: &[Bytes], server: &ServerInfo, shards: &[ShardStats]) -> String {
    let everything = requested.is_empty()
        || requested.iter().any(|name| {
            ["default", "all", "everything"]
                .iter()
                .any(|all| name.eq_ignore_ascii_case(all.as_bytes()))
        });
    let mut out = String::new();
    for (name, render_section) in SECTIONS {
        let wanted = everything
            || requested
                .iter()
                .any(|r| r.eq_ignore_ascii_case(name.as_bytes()));
        if wanted {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            render_section(&mut out, server, shards);
        }
    }
    out
}

fn total(shards: &[ShardStats], field: impl Fn(&ShardStats) -> u64) -> u64 {
    shards.iter().map(field).sum()
}

// `write!` into a String cannot fail, hence the ignored results below.

fn server_section(out: &mut String, server: &ServerInfo, shards: &[ShardStats]) {
    let uptime_s = server.uptime_ms / 1000;
    let _ = write!(
        out,
        "# Server\r\n\
         redis_version:{COMPATIBLE_REDIS_VERSION}\r\n\
         corewire_version:{}\r\n\
         redis_mode:{}\r\n\
         os:{}\r\n\
         arch_bits:{}\r\n\
         multiplexing_api:io_uring\r\n\
         process_id:{}\r\n\
         tcp_port:{}\r\n\
         uptime_in_seconds:{uptime_s}\r\n\
         uptime_in_days:{}\r\n\
         shards:{}\r\n",
        env!("CARGO_PKG_VERSION"),
        if server.cluster_enabled {
            "cluster"
        } else {
            "standalone"
        },
        server.os,
        usize::BITS,
        server.process_id,
        server.tcp_port,
        uptime_s / 86_400,
        shards.len(),
    );
}

fn clients_section(out: &mut String, server: &ServerInfo, _shards: &[ShardStats]) {
    let _ = write!(
        out,
        "# Clients\r\nconnected_clients:{}\r\nblocked_clients:{}\r\nmaxclients:{}\r\n",
        server.connected_clients, server.blocked_clients, server.maxclients
    );
}

fn memory_section(out: &mut String, server: &ServerInfo, shards: &[ShardStats]) {
    // `used_memory` is the keyspace estimate `--maxmemory` limits (store/memory.rs), not the
    // allocator's total; `used_memory_dataset` is payload bytes only.
    let used = total(shards, |s| s.used_memory);
    let _ = write!(
        out,
        "# Memory\r\n\
         used_memory:{used}\r\n\
         used_memory_human:{}\r\n\
         used_memory_dataset:{}\r\n\
         maxmemory:{}\r\n\
         maxmemory_human:{}\r\n\
         maxmemory_policy:{}\r\n\
         number_of_cached_scripts:{}\r\n",
        human_bytes(used),
        total(shards, |s| s.data_bytes),
        server.maxmemory,
        human_bytes(server.maxmemory),
        server.maxmemory_policy,
        server.cached_scripts,
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
fn cpu_section(out: &mut String, server: &ServerInfo, _shards: &[ShardStats]) {
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

fn persistence_section(out: &mut String, server: &ServerInfo, shards: &[ShardStats]) {
    // Redis's fields, over all shards: sizes and counts add up, a rewrite is in progress if
    // any shard's is, a status is `err` if any shard's is, times are the longest. There are
    // no RDB snapshots, so the `rdb_` fields tools poll read as on a Redis that never saved.
    let aof = |f: fn(&crate::aof::AofStats) -> u64| total(shards, |s| f(&s.aof));
    let any = |f: fn(&crate::aof::AofStats) -> bool| shards.iter().any(|s| f(&s.aof));
    let longest =
        |f: fn(&crate::aof::AofStats) -> i64| shards.iter().map(|s| f(&s.aof)).max().unwrap_or(-1);
    let status = |ok: bool| if ok { "ok" } else { "err" };
    let _ = write!(
        out,
        "# Persistence\r\n\
         loading:0\r\n\
         async_loading:0\r\n\
         rdb_bgsave_in_progress:0\r\n\
         rdb_last_bgsave_status:ok\r\n\
         rdb_saves:0\r\n\
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
        u8::from(server.aof_enabled),
        u8::from(any(|a| a.rewrite_in_progress)),
        longest(|a| a.last_rewrite_time_sec),
        longest(|a| a.current_rewrite_time_sec),
        status(!any(|a| !a.last_rewrite_ok)),
        aof(|a| a.rewrites),
        aof(|a| a.rewrites_consecutive_failures),
        status(!any(|a| !a.last_write_ok)),
    );
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

fn stats_section(out: &mut String, server: &ServerInfo, shards: &[ShardStats]) {
    let _ = write!(
        out,
        "# Stats\r\n\
         total_connections_received:{}\r\n\
         total_commands_processed:{}\r\n\
         instantaneous_ops_per_sec:{}\r\n\
         keyspace_hits:{}\r\n\
         keyspace_misses:{}\r\n\
         expired_keys:{}\r\n\
         evicted_keys:{}\r\n\
         rejected_connections:{}\r\n",
        server.total_connections_received,
        total(shards, |s| s.commands_processed),
        total(shards, |s| s.ops_per_sec),
        total(shards, |s| s.keyspace_hits),
        total(shards, |s| s.keyspace_misses),
        total(shards, |s| s.expired_keys),
        total(shards, |s| s.evicted_keys),
        server.rejected_connections,
    );
}

/// What `redis-cli --cluster` reads to tell a cluster node from a standalone one.
fn cluster_section(out: &mut String, server: &ServerInfo, _shards: &[ShardStats]) {
    let _ = write!(
        out,
        "# Cluster\r\ncluster_enabled:{}\r\n",
        u8::from(server.cluster_enabled)
    );
}

fn keyspace_section(out: &mut String, _server: &ServerInfo, shards: &[ShardStats]) {
    out.push_str("# Keyspace\r\n");
    let keys = total(shards, |s| s.keys);
    // Redis lists only non-empty databases.
    if keys > 0 {
        let expires = total(shards, |s| s.expires);
        let _ = write!(
            out,
            "db0:keys={keys},expires={expires},avg_ttl={}\r\n",
            avg_ttl(shards, expires)
        );
    }
}

/// The shards' `avg_ttl` estimates, each weighed by its keys with a TTL.
fn avg_ttl(shards: &[ShardStats], expires: u64) -> u64 {
    if expires == 0 {
        return 0;
    }
    let weighed: u128 = shards
        .iter()
        .map(|s| u128::from(s.avg_ttl_ms) * u128::from(s.expires))
        .sum();
    (weighed / u128::from(expires)) as u64
}

fn shards_section(out: &mut String, _server: &ServerInfo, shards: &[ShardStats]) {
    out.push_str("# Shards\r\n");
    for (i, s) in shards.iter().enumerate() {
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

    fn stats(keys: u64, hits: u64) -> ShardStats {
        ShardStats {
            keys,
            expires: 1,
            keyspace_hits: hits,
            commands_processed: 10,
            ..ShardStats::default()
        }
    }

    #[test]
    fn rates_add_up_and_avg_ttl_weighs_by_keys_with_a_ttl() {
        let shard = |expires, avg_ttl_ms, ops_per_sec| ShardStats {
            keys: 10,
            expires,
            avg_ttl_ms,
            ops_per_sec,
            ..ShardStats::default()
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
        let text = render(
            &[Bytes::from("KEYSPACE")],
            &server,
            &[ShardStats::default()],
        );
        assert_eq!(text, "# Keyspace\r\n");
        let text = render(&[Bytes::from("clients"), Bytes::from("nope")], &server, &[]);
        assert_eq!(
            text,
            "# Clients\r\nconnected_clients:0\r\nblocked_clients:0\r\nmaxclients:0\r\n"
        );
        assert_eq!(render(&[Bytes::from("nope")], &server, &[]), "");
        assert!(render(&[Bytes::from("all")], &server, &[]).contains("# Shards"));
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
        let text = render(&[Bytes::from("memory"), Bytes::from("CPU")], &server, &[]);
        assert!(text.contains("maxmemory:1048576\r\nmaxmemory_human:1.00M\r\n"));
        assert!(text.contains("maxmemory_policy:allkeys-lru\r\n"));
        let persistence = render(&[Bytes::from("persistence")], &server, &[]);
        assert!(persistence.contains("rdb_bgsave_in_progress:0\r\nrdb_last_bgsave_status:ok\r\n"));
        assert!(
            text.contains("\r\n\r\n# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.000042\r\n")
        );
    }
}
