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
    /// Requests waiting in BLPOP / BRPOP.
    pub blocked_clients: u64,
    pub aof_enabled: bool,
    /// `--cluster-enabled`.
    pub cluster_enabled: bool,
}

type SectionRenderer = fn(&mut String, &ServerInfo, &[ShardStats]);

const SECTIONS: [(&str, SectionRenderer); 8] = [
    ("server", server_section),
    ("clients", clients_section),
    ("memory", memory_section),
    ("persistence", persistence_section),
    ("stats", stats_section),
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
        "# Clients\r\nconnected_clients:{}\r\nblocked_clients:{}\r\n",
        server.connected_clients, server.blocked_clients
    );
}

fn memory_section(out: &mut String, _server: &ServerInfo, shards: &[ShardStats]) {
    // `used_memory` is the keyspace estimate `--maxmemory` limits (store/memory.rs), not the
    // allocator's total; `used_memory_dataset` is payload bytes only.
    let _ = write!(
        out,
        "# Memory\r\nused_memory:{}\r\nused_memory_dataset:{}\r\n",
        total(shards, |s| s.used_memory),
        total(shards, |s| s.data_bytes)
    );
}

fn persistence_section(out: &mut String, server: &ServerInfo, shards: &[ShardStats]) {
    // Redis's fields, over all shards: sizes and counts add up, a rewrite is in progress if
    // any shard's is, a status is `err` if any shard's is, times are the longest.
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

fn stats_section(out: &mut String, _server: &ServerInfo, shards: &[ShardStats]) {
    let _ = write!(
        out,
        "# Stats\r\n\
         total_commands_processed:{}\r\n\
         keyspace_hits:{}\r\n\
         keyspace_misses:{}\r\n\
         expired_keys:{}\r\n\
         evicted_keys:{}\r\n",
        total(shards, |s| s.commands_processed),
        total(shards, |s| s.keyspace_hits),
        total(shards, |s| s.keyspace_misses),
        total(shards, |s| s.expired_keys),
        total(shards, |s| s.evicted_keys),
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
        let _ = write!(
            out,
            "db0:keys={keys},expires={},avg_ttl=0\r\n",
            total(shards, |s| s.expires)
        );
    }
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
            "# Clients\r\nconnected_clients:0\r\nblocked_clients:0\r\n"
        );
        assert_eq!(render(&[Bytes::from("nope")], &server, &[]), "");
        assert!(render(&[Bytes::from("all")], &server, &[]).contains("# Shards"));
    }
}
