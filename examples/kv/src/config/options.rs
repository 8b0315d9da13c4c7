//! The option table's rows (see [`super::table`] for what a row says): Redis 7.0's options in
//! `config.c`'s order of kinds, then corewire's own.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::table::*;
use super::value::{Kind, Special};
use crate::server::config::AcceptChoice;

const BOOL: Kind = Kind::Bool;
const INT: Kind = Kind::Int {
    min: 0,
    max: i32::MAX as i64,
};
const fn int(min: i64, max: i64) -> Kind {
    Kind::Int { min, max }
}
const fn mem(min: i64, max: i64) -> Kind {
    Kind::Memory { min, max }
}
const LONG_MAX: i64 = i64::MAX;
const CHECKED: Kind = Kind::Special(Special::Checked);

const YES_NO_LOCAL: &[&str] = &["no", "yes", "local"];

fn parsed<T: std::str::FromStr>(value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("invalid value {value:?}"))
}

fn check_parse<T: std::str::FromStr>(value: &str) -> Result<String, String>
where
    T::Err: std::fmt::Display,
{
    value
        .parse::<T>()
        .map(|_| value.to_owned())
        .map_err(|e| e.to_string())
}

fn yes(value: &str) -> bool {
    value == "yes"
}

/// The table. Redis's options first, in `config.c`'s order, then corewire's own.
pub static OPTIONS: &[OptionSpec] = &[
    // Redis's booleans.
    opt("rdbchecksum", BOOL, "yes")
        .flags(IMMUTABLE)
        .live(LiveKey::Persistence),
    opt("daemonize", BOOL, "no").flags(IMMUTABLE | STRICT),
    opt("io-threads-do-reads", BOOL, "no").flags(IMMUTABLE),
    opt("always-show-logo", BOOL, "no").flags(IMMUTABLE),
    opt("protected-mode", BOOL, "yes")
        .both(
            |c, v| {
                c.protected_mode = yes(v);
                Ok(())
            },
            LiveKey::ProtectedMode,
        )
        .help("refuse clients from outside the loopback interface while no password is set"),
    opt("rdbcompression", BOOL, "yes").live(LiveKey::Persistence),
    opt("rdb-del-sync-files", BOOL, "no"),
    opt("activerehashing", BOOL, "yes"),
    opt("stop-writes-on-bgsave-error", BOOL, "yes"),
    opt("set-proc-title", BOOL, "yes").flags(IMMUTABLE),
    opt("dynamic-hz", BOOL, "yes"),
    opt("lazyfree-lazy-eviction", BOOL, "no"),
    opt("lazyfree-lazy-expire", BOOL, "no"),
    opt("lazyfree-lazy-server-del", BOOL, "no"),
    opt("lazyfree-lazy-user-del", BOOL, "no"),
    opt("lazyfree-lazy-user-flush", BOOL, "no"),
    opt("repl-disable-tcp-nodelay", BOOL, "no"),
    opt("repl-diskless-sync", BOOL, "yes"),
    opt("aof-rewrite-incremental-fsync", BOOL, "yes"),
    opt("no-appendfsync-on-rewrite", BOOL, "no"),
    opt("cluster-require-full-coverage", BOOL, "yes")
        .start(|c, v| {
            c.cluster.require_full_coverage = yes(v);
            Ok(())
        })
        .help("the cluster refuses requests while a slot has no working primary"),
    opt("rdb-save-incremental-fsync", BOOL, "yes"),
    opt("aof-load-truncated", BOOL, "yes")
        .start(|c, v| {
            c.aof_load.load_truncated = yes(v);
            Ok(())
        })
        .help("cut a torn last AOF record (an incomplete write) with a warning at start-up, or refuse to start"),
    opt("aof-use-rdb-preamble", BOOL, "yes"),
    opt("aof-timestamp-enabled", BOOL, "no"),
    opt("cluster-replica-no-failover", BOOL, "no")
        .alias("cluster-slave-no-failover")
        .start(|c, v| {
            c.cluster.replica_no_failover = yes(v);
            Ok(())
        })
        .help("a replica never replaces its failed primary by itself"),
    opt("replica-lazy-flush", BOOL, "no").alias("slave-lazy-flush"),
    opt("replica-serve-stale-data", BOOL, "yes").alias("slave-serve-stale-data"),
    opt("replica-read-only", BOOL, "yes").alias("slave-read-only"),
    opt("replica-ignore-maxmemory", BOOL, "yes").alias("slave-ignore-maxmemory"),
    opt("jemalloc-bg-thread", BOOL, "yes"),
    opt("activedefrag", BOOL, "no"),
    opt("syslog-enabled", BOOL, "no").flags(IMMUTABLE | STRICT),
    opt("cluster-enabled", BOOL, "no")
        .flags(IMMUTABLE)
        .start(|c, v| {
            c.cluster_enabled = yes(v);
            Ok(())
        })
        .help("Redis Cluster mode: own hash slots, redirect the others (MOVED, ASK), CLUSTER commands, MIGRATE"),
    opt("appendonly", BOOL, "no")
        .start(|c, v| {
            c.appendonly = yes(v);
            Ok(())
        })
        .help("keep an append-only log per shard, under dir/appenddirname (or --aof DIR)"),
    opt("cluster-allow-reads-when-down", BOOL, "no"),
    opt("cluster-allow-pubsubshard-when-down", BOOL, "yes"),
    opt("crash-log-enabled", BOOL, "yes"),
    opt("crash-memcheck-enabled", BOOL, "yes"),
    opt("use-exit-on-panic", BOOL, "no").flags(HIDDEN),
    opt("disable-thp", BOOL, "yes")
        .flags(IMMUTABLE)
        .start(|c, v| {
            c.disable_thp = yes(v);
            Ok(())
        })
        .help("no transparent huge pages for the process (an empty or flushed heap then holds 4 KiB pages, not 2 MiB ones)"),
    opt("cluster-allow-replica-migration", BOOL, "yes"),
    opt("replica-announced", BOOL, "yes"),
    opt("latency-tracking", BOOL, "yes")
        .live(LiveKey::LatencyTracking)
        .help("per-command latency percentiles in INFO latencystats"),
    opt("aof-disable-auto-gc", BOOL, "no"),
    opt("replica-ignore-disk-write-errors", BOOL, "no"),
    // Redis's strings.
    opt("aclfile", Kind::Str, "").flags(IMMUTABLE),
    opt("unixsocket", Kind::Str, "")
        .flags(IMMUTABLE)
        .start(|c, v| {
            c.unixsocket = (!v.is_empty()).then(|| PathBuf::from(v));
            Ok(())
        })
        .help("path of a Unix socket RESP clients may connect to as well"),
    opt("pidfile", Kind::Str, "")
        .flags(IMMUTABLE)
        .start(|c, v| {
            c.pidfile = (!v.is_empty()).then(|| PathBuf::from(v));
            Ok(())
        })
        .help("write the process id to this file at start-up (removed at a clean stop)"),
    opt("replica-announce-ip", Kind::Str, "").alias("slave-announce-ip"),
    opt("masteruser", Kind::Str, "").flags(SENSITIVE),
    opt("cluster-announce-ip", Kind::Str, "")
        .check(|v| match v {
            "" => Ok(String::new()),
            ip => check_parse::<IpAddr>(ip),
        })
        .start(|c, v| {
            c.cluster.announce_ip = (!v.is_empty()).then(|| parsed(v)).transpose()?;
            Ok(())
        })
        .help("the IP other nodes and clients are told (default: bind, or learned from the first CLUSTER MEET)"),
    opt("cluster-config-file", Kind::Str, "nodes.conf")
        .flags(IMMUTABLE)
        .start(|c, v| {
            c.cluster.config_file = PathBuf::from(v);
            Ok(())
        })
        .help("this node's id and cluster configuration, kept across restarts"),
    opt("cluster-announce-hostname", Kind::Str, ""),
    opt("syslog-ident", Kind::Str, "redis").flags(IMMUTABLE),
    opt("dbfilename", Kind::Str, "dump.rdb")
        .live(LiveKey::Persistence)
        .help("the RDB dump's file name in dir: SAVE/BGSAVE write it, start-up loads it (without the AOF)"),
    opt("appendfilename", Kind::Str, "appendonly.aof").flags(IMMUTABLE),
    opt("appenddirname", Kind::Str, "appendonlydir")
        .flags(IMMUTABLE)
        .start(|c, v| {
            c.appenddirname = PathBuf::from(v);
            Ok(())
        })
        .help("the AOF folder inside dir"),
    opt("server_cpulist", Kind::Str, "").flags(IMMUTABLE),
    opt("bio_cpulist", Kind::Str, "").flags(IMMUTABLE),
    opt("aof_rewrite_cpulist", Kind::Str, "").flags(IMMUTABLE),
    opt("bgsave_cpulist", Kind::Str, "").flags(IMMUTABLE),
    opt("ignore-warnings", Kind::Str, ""),
    opt("proc-title-template", Kind::Str, "{title} {listen-addr} {server-mode}"),
    opt("bind-source-addr", Kind::Str, ""),
    opt("logfile", Kind::Str, "")
        .flags(IMMUTABLE)
        .start(|c, v| {
            c.logfile = (!v.is_empty()).then(|| PathBuf::from(v));
            Ok(())
        })
        .help("append the log to this file (default: standard error)"),
    opt("masterauth", Kind::Str, "").flags(SENSITIVE),
    opt("requirepass", Kind::Str, "")
        .flags(SENSITIVE)
        .both(
            |c, v| {
                c.requirepass = (!v.is_empty()).then(|| v.to_owned());
                Ok(())
            },
            LiveKey::RequirePass,
        )
        .help("require AUTH with this password (empty: none)"),
    // Redis's enums.
    opt("supervised", Kind::Enum(&["upstart", "systemd", "auto", "no"]), "no").flags(IMMUTABLE | STRICT),
    opt(
        "syslog-facility",
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        "local0",
    )
    .flags(IMMUTABLE),
    opt(
        "repl-diskless-load",
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        "disabled",
    ),
    opt(
        "loglevel",
        Kind::Enum(&["debug", "verbose", "notice", "warning"]),
        "notice",
    )
    .both(
        |c, v| {
            c.loglevel = v.to_owned();
            Ok(())
        },
        LiveKey::LogLevel,
    )
    .help("debug, verbose, notice (default) or warning; RUST_LOG, when set, wins"),
    opt(
        "maxmemory-policy",
        Kind::Enum(&[
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction",
        ]),
        "noeviction",
    )
    .both(
        |c, v| {
            c.maxmemory_policy = v.parse()?;
            Ok(())
        },
        LiveKey::MaxMemoryPolicy,
    )
    .help("past maxmemory: noeviction (refuse writes with OOM) or evict sampled keys, per shard"),
    opt(
        "appendfsync",
        Kind::Enum(&["everysec", "always", "no"]),
        "everysec",
    )
    .start(|c, v| {
        c.fsync = parsed(v)?;
        Ok(())
    })
    .help("AOF fsync policy: always, everysec or no"),
    opt(
        "oom-score-adj",
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
        "no",
    ),
    opt(
        "acl-pubsub-default",
        Kind::Enum(&["allchannels", "resetchannels"]),
        "resetchannels",
    ),
    opt(
        "sanitize-dump-payload",
        Kind::Enum(&["no", "yes", "clients"]),
        "no",
    ),
    opt("enable-protected-configs", Kind::Enum(YES_NO_LOCAL), "no").flags(IMMUTABLE),
    opt("enable-debug-command", Kind::Enum(YES_NO_LOCAL), "no")
        .flags(IMMUTABLE)
        .start(|c, v| {
            c.enable_debug_command = v != "no";
            Ok(())
        })
        .help("allow DEBUG (yes, or local for connections from this host; default no)"),
    opt("enable-module-command", Kind::Enum(YES_NO_LOCAL), "no").flags(IMMUTABLE),
    opt(
        "cluster-preferred-endpoint-type",
        Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        "ip",
    ),
    opt(
        "propagation-error-behavior",
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        "ignore",
    ),
    opt(
        "shutdown-on-sigint",
        Kind::Flags(&["default", "save", "nosave", "now", "force"]),
        "default",
    ),
    opt(
        "shutdown-on-sigterm",
        Kind::Flags(&["default", "save", "nosave", "now", "force"]),
        "default",
    ),
    // Redis's integers.
    opt("databases", int(1, i32::MAX as i64), "16")
        .flags(IMMUTABLE)
        .start(|_, _| Ok(()))
        .help("accepted for compatibility: one keyspace is served, SELECT of another index is refused as Redis Cluster refuses it"),
    opt("port", int(0, 65535), "6379")
        .start(|c, v| {
            c.port = parsed(v)?;
            Ok(())
        })
        .help("RESP port (0: any free port, printed in the ready line)"),
    opt("io-threads", int(1, 128), "1").flags(IMMUTABLE),
    opt("auto-aof-rewrite-percentage", INT, "100")
        .start(|c, v| {
            c.aof_rewrite.percentage = parsed(v)?;
            Ok(())
        })
        .help("rewrite a shard's AOF when it grew this much since its last rewrite (0: never by itself)"),
    opt("cluster-replica-validity-factor", INT, "10").alias("cluster-slave-validity-factor"),
    opt("list-max-listpack-size", int(i32::MIN as i64, i32::MAX as i64), "-2")
        .alias("list-max-ziplist-size")
        .live(LiveKey::Encoding),
    opt("tcp-keepalive", INT, "300"),
    opt("cluster-migration-barrier", INT, "1"),
    opt("active-defrag-cycle-min", int(1, 99), "1"),
    opt("active-defrag-cycle-max", int(1, 99), "25"),
    opt("active-defrag-threshold-lower", int(0, 1000), "10"),
    opt("active-defrag-threshold-upper", int(0, 1000), "100"),
    opt("lfu-log-factor", INT, "10"),
    opt("lfu-decay-time", INT, "1"),
    opt("replica-priority", INT, "100").alias("slave-priority"),
    opt("repl-diskless-sync-delay", INT, "5"),
    opt("maxmemory-samples", int(1, i32::MAX as i64), "5")
        .live(LiveKey::MaxMemorySamples)
        .help("keys sampled per eviction"),
    opt("maxmemory-eviction-tenacity", int(0, 100), "10"),
    opt("timeout", INT, "0")
        .both(
            |c, v| {
                c.timeout = Duration::from_secs(parsed(v)?);
                Ok(())
            },
            LiveKey::Timeout,
        )
        .help("close a client idle this many seconds (0: never)"),
    opt("replica-announce-port", int(0, 65535), "0").alias("slave-announce-port"),
    opt("tcp-backlog", INT, "511").flags(IMMUTABLE),
    opt("cluster-port", int(0, 65535), "0")
        .flags(IMMUTABLE)
        .start(|c, v| {
            c.cluster.bus_port = match parsed::<u16>(v)? {
                0 => None,
                port => Some(port),
            };
            Ok(())
        })
        .help("cluster bus port (0: port + 10000)"),
    opt("cluster-announce-bus-port", int(0, 65535), "0"),
    opt("cluster-announce-port", int(0, 65535), "0"),
    opt("cluster-announce-tls-port", int(0, 65535), "0"),
    opt("repl-timeout", int(1, i32::MAX as i64), "60"),
    opt("repl-ping-replica-period", int(1, i32::MAX as i64), "10").alias("repl-ping-slave-period"),
    opt("list-compress-depth", INT, "0"),
    opt("rdb-key-save-delay", int(i32::MIN as i64, i32::MAX as i64), "0").flags(HIDDEN),
    opt("key-load-delay", int(i32::MIN as i64, i32::MAX as i64), "0").flags(HIDDEN),
    opt("active-expire-effort", int(1, 10), "1"),
    opt("hz", INT, "10"),
    opt("min-replicas-to-write", INT, "0")
        .alias("min-slaves-to-write")
        .live(LiveKey::MinReplicasToWrite),
    opt("min-replicas-max-lag", INT, "10").alias("min-slaves-max-lag"),
    opt("watchdog-period", INT, "0").flags(HIDDEN),
    opt("shutdown-timeout", INT, "10"),
    opt("repl-diskless-sync-max-replicas", INT, "0"),
    opt(
        "maxclients",
        Kind::UInt {
            min: 1,
            max: u32::MAX as u64,
        },
        "10000",
    )
    .both(
        |c, v| {
            c.maxclients = parsed(v)?;
            Ok(())
        },
        LiveKey::MaxClients,
    )
    .help("maximum RESP clients"),
    opt("unixsocketperm", Kind::Octal { max: 0o777 }, "0")
        .flags(IMMUTABLE)
        .start(|c, v| {
            c.unixsocketperm = u32::from_str_radix(v, 8).map_err(|e| e.to_string())?;
            Ok(())
        }),
    opt(
        "socket-mark-id",
        Kind::UInt {
            min: 0,
            max: u32::MAX as u64,
        },
        "0",
    )
    .flags(IMMUTABLE),
    opt("active-defrag-max-scan-fields", int(1, LONG_MAX), "1000"),
    opt("slowlog-max-len", int(0, LONG_MAX), "128")
        .live(LiveKey::SlowlogMaxLen)
        .help("entries SLOWLOG keeps"),
    opt("acllog-max-len", int(0, LONG_MAX), "128"),
    opt("busy-reply-threshold", int(0, LONG_MAX), "5000")
        .alias("lua-time-limit")
        .live(LiveKey::BusyReplyThreshold),
    opt("cluster-node-timeout", int(0, LONG_MAX), "15000")
        .start(|c, v| {
            c.cluster.node_timeout_ms = parsed(v)?;
            Ok(())
        })
        .help("a cluster node silent this many ms is shown fail?"),
    opt("slowlog-log-slower-than", int(-1, LONG_MAX), "10000")
        .live(LiveKey::SlowlogSlowerThan)
        .help("SLOWLOG logs commands slower than this many microseconds (-1: none)"),
    opt("latency-monitor-threshold", int(0, LONG_MAX), "0")
        .live(LiveKey::LatencyMonitorThreshold)
        .help("LATENCY records events of at least this many ms (0: off)"),
    opt("proto-max-bulk-len", mem(1 << 20, LONG_MAX), "536870912")
        .start(|c, v| {
            c.parser_limits.max_bulk_len = parsed(v)?;
            Ok(())
        })
        .help("largest bulk string accepted"),
    opt("stream-node-max-entries", int(0, LONG_MAX), "100").live(LiveKey::Encoding),
    opt("repl-backlog-size", mem(1, LONG_MAX), "1048576"),
    opt("maxmemory", Kind::UMemory { max: u64::MAX }, "0")
        .both(
            |c, v| {
                c.maxmemory = parsed(v)?;
                Ok(())
            },
            LiveKey::MaxMemory,
        )
        .help("memory limit for the keyspace, shared equally by the shards (0: none), estimated from keys and values"),
    opt(
        "cluster-link-sendbuf-limit",
        Kind::UMemory { max: u64::MAX },
        "0",
    ),
    opt("hash-max-listpack-entries", int(0, LONG_MAX), "512")
        .alias("hash-max-ziplist-entries")
        .live(LiveKey::Encoding),
    opt("set-max-intset-entries", int(0, LONG_MAX), "512").live(LiveKey::Encoding),
    opt("zset-max-listpack-entries", int(0, LONG_MAX), "128")
        .alias("zset-max-ziplist-entries")
        .live(LiveKey::Encoding),
    opt("active-defrag-ignore-bytes", mem(1, LONG_MAX), "104857600"),
    opt("hash-max-listpack-value", mem(0, LONG_MAX), "64")
        .alias("hash-max-ziplist-value")
        .live(LiveKey::Encoding),
    opt("stream-node-max-bytes", mem(0, LONG_MAX), "4096").live(LiveKey::Encoding),
    opt("zset-max-listpack-value", mem(0, LONG_MAX), "64")
        .alias("zset-max-ziplist-value")
        .live(LiveKey::Encoding),
    opt("hll-sparse-max-bytes", mem(0, LONG_MAX), "3000").live(LiveKey::Encoding),
    opt("tracking-table-max-keys", int(0, LONG_MAX), "1000000")
        .live(LiveKey::TrackingTableMaxKeys)
        .help("keys the client-tracking table remembers at most (all shards)"),
    opt("client-query-buffer-limit", mem(1 << 20, LONG_MAX), "1073741824"),
    opt("maxmemory-clients", Kind::MemoryOrPercent { max_percent: 100 }, "0"),
    opt("repl-backlog-ttl", int(0, LONG_MAX), "3600"),
    opt("auto-aof-rewrite-min-size", mem(0, LONG_MAX), "67108864")
        .start(|c, v| {
            c.aof_rewrite.min_size = parsed(v)?;
            Ok(())
        })
        .help("... but not below this size"),
    opt(
        "loading-process-events-interval-bytes",
        int(1024, i32::MAX as i64),
        "2097152",
    )
    .flags(HIDDEN),
    // Redis's special options.
    opt("dir", Kind::Special(Special::Dir), "")
        .start(|c, v| {
            c.dir = PathBuf::from(v);
            Ok(())
        })
        .help("working directory: the AOF folder is created in it"),
    opt("save", Kind::Special(Special::Save), "")
        .live(LiveKey::Persistence)
        .help("save points: \"SECONDS CHANGES ...\", a background save when one is reached (\"\": none)"),
    opt(
        "client-output-buffer-limit",
        Kind::Special(Special::ClientOutputBufferLimit),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    )
    .both(
        |c, v| {
            let limits = super::value::OutputBufferLimits::parse(v)
                .ok_or_else(|| format!("invalid value {v:?}"))?;
            let (hard, soft, seconds) = limits.pubsub;
            c.pubsub_output_limit = crate::session::OutputLimit {
                hard: hard as usize,
                soft: soft as usize,
                soft_ms: seconds.saturating_mul(1000),
            };
            Ok(())
        },
        LiveKey::ClientOutputBufferLimit,
    )
    .help("the pubsub class is enforced: a subscriber leaving more output unread is dropped"),
    opt(
        "oom-score-adj-values",
        Kind::Special(Special::OomScoreAdjValues),
        "0 200 800",
    ),
    opt(
        "notify-keyspace-events",
        Kind::Special(Special::NotifyKeyspaceEvents),
        "",
    )
    .live(LiveKey::NotifyKeyspaceEvents)
    .help("keyspace notification classes (Ag$lshzxeKEtmdn), published to __keyspace@0__ / __keyevent@0__"),
    opt("bind", Kind::Special(Special::Bind), super::bind::DEFAULT)
        .start(|c, v| {
            c.bind_addresses = super::bind::parse(v)?;
            c.bind = super::bind::first(v)?.unwrap_or(IpAddr::from([0, 0, 0, 0]));
            Ok(())
        })
        .help("listen addresses (`*`: any IPv4, `::*`: any IPv6, `-` prefix: optional); the TLS, binary and cluster bus ports use the first"),
    // Read by the replica side at start (`server/replica`).
    opt("replicaof", Kind::Special(Special::ReplicaOf), "")
        .alias("slaveof")
        .flags(IMMUTABLE),
    opt(
        "latency-tracking-info-percentiles",
        Kind::Special(Special::LatencyPercentiles),
        "50 99 99.9",
    )
    .live(LiveKey::LatencyPercentiles)
    .help("percentiles INFO latencystats shows"),
    // Redis's TLS options (`server/tls.rs` checks and applies them): set at start, and at run
    // time, but for the port, the bus and replication, through the TLS reload.
    opt("tls-port", CHECKED, "0")
        .flags(IMMUTABLE)
        .check(|v| tls_check("tls-port", v))
        .start(|c, v| c.tls.set("tls-port", v)),
    opt("tls-cert-file", CHECKED, "")
        .check(|v| tls_check("tls-cert-file", v))
        .both(|c, v| c.tls.set("tls-cert-file", v), LiveKey::Tls),
    opt("tls-key-file", CHECKED, "")
        .check(|v| tls_check("tls-key-file", v))
        .both(|c, v| c.tls.set("tls-key-file", v), LiveKey::Tls),
    opt("tls-key-file-pass", CHECKED, "")
        .check(|v| tls_check("tls-key-file-pass", v))
        .both(|c, v| c.tls.set("tls-key-file-pass", v), LiveKey::Tls),
    opt("tls-client-cert-file", CHECKED, "")
        .check(|v| tls_check("tls-client-cert-file", v))
        .both(|c, v| c.tls.set("tls-client-cert-file", v), LiveKey::Tls),
    opt("tls-client-key-file", CHECKED, "")
        .check(|v| tls_check("tls-client-key-file", v))
        .both(|c, v| c.tls.set("tls-client-key-file", v), LiveKey::Tls),
    opt("tls-client-key-file-pass", CHECKED, "")
        .check(|v| tls_check("tls-client-key-file-pass", v))
        .both(|c, v| c.tls.set("tls-client-key-file-pass", v), LiveKey::Tls),
    opt("tls-ca-cert-file", CHECKED, "")
        .check(|v| tls_check("tls-ca-cert-file", v))
        .both(|c, v| c.tls.set("tls-ca-cert-file", v), LiveKey::Tls),
    opt("tls-ca-cert-dir", CHECKED, "")
        .check(|v| tls_check("tls-ca-cert-dir", v))
        .both(|c, v| c.tls.set("tls-ca-cert-dir", v), LiveKey::Tls),
    opt("tls-dh-params-file", CHECKED, "")
        .check(|v| tls_check("tls-dh-params-file", v))
        .both(|c, v| c.tls.set("tls-dh-params-file", v), LiveKey::Tls),
    opt("tls-auth-clients", CHECKED, "yes")
        .check(|v| tls_check("tls-auth-clients", v))
        .both(|c, v| c.tls.set("tls-auth-clients", v), LiveKey::Tls),
    opt("tls-protocols", CHECKED, "")
        .check(|v| tls_check("tls-protocols", v))
        .both(|c, v| c.tls.set("tls-protocols", v), LiveKey::Tls),
    opt("tls-ciphersuites", CHECKED, "")
        .check(|v| tls_check("tls-ciphersuites", v))
        .both(|c, v| c.tls.set("tls-ciphersuites", v), LiveKey::Tls),
    opt("tls-ciphers", CHECKED, "")
        .check(|v| tls_check("tls-ciphers", v))
        .both(|c, v| c.tls.set("tls-ciphers", v), LiveKey::Tls),
    opt("tls-prefer-server-ciphers", CHECKED, "no")
        .check(|v| tls_check("tls-prefer-server-ciphers", v))
        .both(|c, v| c.tls.set("tls-prefer-server-ciphers", v), LiveKey::Tls),
    opt("tls-session-caching", CHECKED, "yes")
        .check(|v| tls_check("tls-session-caching", v))
        .both(|c, v| c.tls.set("tls-session-caching", v), LiveKey::Tls),
    opt("tls-session-cache-size", CHECKED, "20480")
        .check(|v| tls_check("tls-session-cache-size", v))
        .both(|c, v| c.tls.set("tls-session-cache-size", v), LiveKey::Tls),
    opt("tls-session-cache-timeout", CHECKED, "300")
        .check(|v| tls_check("tls-session-cache-timeout", v))
        .both(|c, v| c.tls.set("tls-session-cache-timeout", v), LiveKey::Tls),
    // Modifiable in Redis; read at start here: CONFIG SET of the current value is accepted.
    opt("tls-cluster", CHECKED, "no")
        .check(|v| tls_check("tls-cluster", v))
        .start(|c, v| c.tls.set("tls-cluster", v)),
    opt("tls-replication", CHECKED, "no")
        .check(|v| tls_check("tls-replication", v))
        .start(|c, v| c.tls.set("tls-replication", v)),
    // corewire's own.
    opt("shards", CHECKED, "")
        .flags(OURS)
        .check(|v| match v.parse::<usize>() {
            _ if v.is_empty() => Ok(String::new()),
            Ok(n) if n > 0 => Ok(v.to_owned()),
            _ => Err("argument must be a positive integer".into()),
        })
        .start(|c, v| {
            if !v.is_empty() {
                c.shards = parsed(v)?;
            }
            Ok(())
        })
        .help("shard threads (default: one per CPU)"),
    opt("binary-port", CHECKED, "")
        .flags(OURS)
        .check(optional::<u16>)
        .start(|c, v| {
            c.binary_port = (!v.is_empty()).then(|| parsed(v)).transpose()?;
            Ok(())
        })
        .help("also serve the flatbuffers binary protocol on this TCP port"),
    opt("rdma", CHECKED, "")
        .flags(OURS)
        .check(optional::<std::net::SocketAddr>)
        .start(|c, v| {
            c.rdma = (!v.is_empty()).then(|| parsed(v)).transpose()?;
            Ok(())
        })
        .help("ADDR:PORT: also serve the binary protocol over RDMA (rdma_cm) there"),
    opt("repl-rdma", CHECKED, "")
        .flags(OURS)
        .check(optional::<std::net::SocketAddr>)
        .start(|c, v| {
            c.repl_rdma = (!v.is_empty()).then(|| parsed(v)).transpose()?;
            Ok(())
        })
        .help("ADDR:PORT: serve replicas that set repl-transport rdma (PSYNC over RDMA) there; use the RESP port's number so REPLICAOF host port names either"),
    opt("repl-transport", Kind::Enum(&["tcp", "rdma"]), "tcp")
        .flags(OURS)
        .help("how this replica reaches its master: tcp, or rdma to the master's --repl-rdma endpoint at REPLICAOF's host and port (no fallback to TCP)"),
    opt("repl-shard-links", BOOL, "yes")
        .flags(OURS)
        .help("a replica with several shards offers its master one link per shard (taken only from a corewire master with the same shard count and key map; not in cluster mode); no: the single stream"),
    opt("rdma-poller", CHECKED, "adaptive")
        .flags(OURS)
        .check(check_parse::<corewire::transport::rdma::PollerMode>)
        .start(|c, v| {
            c.rdma_poller = v.parse()?;
            Ok(())
        })
        .help("polling|polling-yield|event|adaptive[:US]"),
    opt("aof", CHECKED, "")
        .flags(OURS)
        .start(|c, v| {
            c.aof_dir = (!v.is_empty()).then(|| PathBuf::from(v));
            Ok(())
        })
        .help("DIR: enable the per-shard append-only logs in DIR (as appendonly yes with this folder)"),
    opt("aof-fix", BOOL, "no")
        .flags(OURS | NO_STATE)
        .start(|c, v| {
            c.aof_load.fix = yes(v);
            Ok(())
        })
        .help("also cut a log at a corrupt record that has data after it (the cut bytes are saved to <log>.cut-<offset>)"),
    opt("aof-max-record-bytes", CHECKED, "4294967295")
        .flags(OURS)
        .check(|v| match v.parse::<u64>() {
            Ok(n) if n > 0 && n <= crate::aof::MAX_PAYLOAD_LEN => Ok(v.to_owned()),
            _ => Err(format!(
                "argument must be between 1 and {} inclusive",
                crate::aof::MAX_PAYLOAD_LEN
            )),
        })
        .start(|c, v| {
            c.aof_max_record_bytes = parsed(v)?;
            Ok(())
        })
        .help("largest AOF record one write may log; bigger writes are refused"),
    opt("accept", Kind::Enum(&["handoff", "reuseport"]), "handoff")
        .flags(OURS)
        .start(|c, v| {
            c.accept = match v {
                "reuseport" => AcceptChoice::ReusePort,
                _ => AcceptChoice::Handoff,
            };
            Ok(())
        })
        .help("how connections reach shards"),
    opt("budget", CHECKED, "64")
        .flags(OURS)
        .check(|v| match v.parse::<u32>() {
            _ if v == "unlimited" => Ok(v.to_owned()),
            Ok(n) if n > 0 => Ok(v.to_owned()),
            _ => Err("argument must be a positive integer or unlimited".into()),
        })
        .start(|c, v| {
            c.conn_budget = match v {
                "unlimited" => corewire::runtime::Budget::UNLIMITED,
                n => corewire::runtime::Budget::messages(parsed(n)?),
            };
            Ok(())
        })
        .help("work one RESP connection does per round before the rest of its shard runs, in keys or elements"),
    opt("max-backlog", CHECKED, "1024")
        .flags(OURS)
        .check(check_parse::<usize>)
        .start(|c, v| {
            c.max_backlog = parsed::<usize>(v)?.max(1);
            Ok(())
        })
        .help("unanswered requests per connection before reading pauses"),
    opt("max-pending-output", CHECKED, "16777216")
        .flags(OURS)
        .check(check_parse::<usize>)
        .start(|c, v| {
            c.max_pending_output = parsed(v)?;
            Ok(())
        })
        .help("unwritten reply bytes per connection before parsing pauses"),
    opt("pubsub-output-limit", CHECKED, "")
        .flags(OURS)
        .check(|v| match v {
            "" => Ok(String::new()),
            v => parse_output_limit(v).map(|_| v.to_owned()),
        })
        .start(|c, v| {
            if !v.is_empty() {
                c.pubsub_output_limit = parse_output_limit(v)?;
            }
            Ok(())
        })
        .help("HARD[:SOFT:SECONDS]: unread Pub/Sub bytes before a subscriber is dropped (as client-output-buffer-limit pubsub)"),
    opt("idle-spin-us", CHECKED, "0")
        .flags(OURS)
        .check(check_parse::<u64>)
        .start(|c, v| {
            c.idle_spin = Duration::from_micros(parsed(v)?);
            Ok(())
        })
        .help("how long an idle shard polls before sleeping"),
    opt("pin", Kind::Enum(&["auto", "yes", "no"]), "auto")
        .flags(OURS | NO_STATE)
        .start(|c, v| {
            c.pin = match v {
                "yes" => Some(true),
                "no" => Some(false),
                _ => None,
            };
            Ok(())
        })
        .help("pin shard i to CPU i (auto: only when there are more CPUs than shards); --pin / --no-pin"),
    opt("mesh-batch", CHECKED, "0")
        .flags(OURS)
        .check(check_parse::<usize>)
        .start(|c, v| {
            c.mesh_batch = parsed(v)?;
            Ok(())
        })
        .help("most commands per cross-shard message (0: no limit; 1 turns batching off)"),
    opt("metrics", CHECKED, "")
        .flags(OURS)
        .check(optional::<std::net::SocketAddr>)
        .start(|c, v| {
            c.metrics = (!v.is_empty()).then(|| parsed(v)).transpose()?;
            Ok(())
        })
        .help("ADDR:PORT: serve the runtime's per-shard counters in Prometheus text format"),
];

/// A `tls-*` value, checked as the TLS settings read it.
fn tls_check(name: &str, value: &str) -> Result<String, String> {
    crate::server::tls::TlsSettings::default().set(name, value)?;
    Ok(value.to_owned())
}

fn optional<T: std::str::FromStr>(value: &str) -> Result<String, String>
where
    T::Err: std::fmt::Display,
{
    if value.is_empty() {
        return Ok(String::new());
    }
    check_parse::<T>(value)
}

/// `HARD[:SOFT:SECONDS]` in bytes and seconds.
fn parse_output_limit(value: &str) -> Result<crate::session::OutputLimit, String> {
    let fields: Vec<&str> = value.split(':').collect();
    let number = |text: &str| text.parse::<u64>().map_err(|e| e.to_string());
    match fields[..] {
        [hard] => Ok(crate::session::OutputLimit {
            hard: number(hard)? as usize,
            soft: 0,
            soft_ms: 0,
        }),
        [hard, soft, seconds] => Ok(crate::session::OutputLimit {
            hard: number(hard)? as usize,
            soft: number(soft)? as usize,
            soft_ms: number(seconds)?.saturating_mul(1000),
        }),
        _ => Err("expected HARD or HARD:SOFT:SECONDS".into()),
    }
}
