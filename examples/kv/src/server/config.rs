//! The server's settings and the `corewire-kv` command line that fills them.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use corewire::runtime::Budget;
use corewire::transport::rdma::PollerMode;

use crate::aof::{FsyncPolicy, LoadPolicy, RewritePolicy, MAX_PAYLOAD_LEN};
use crate::number::parse_memory;
use crate::resp::ParserLimits;
use crate::store::EvictionPolicy;

/// How connections are spread over shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptChoice {
    /// Every shard listens on the port (SO_REUSEPORT); the kernel hashes connections.
    ReusePort,
    /// Shard 0 accepts and hands each connection to the shard with the fewest.
    Handoff,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofConfig {
    pub dir: PathBuf,
    pub fsync: FsyncPolicy,
    /// What start-up may cut off a damaged log.
    pub load: LoadPolicy,
    /// Largest record one write may log; a write that could need more is refused before it
    /// runs. At most (and by default) [`MAX_PAYLOAD_LEN`], the format's limit.
    pub max_record_bytes: u64,
    /// When a shard rewrites its log by itself.
    pub rewrite: RewritePolicy,
}

impl AofConfig {
    pub fn new(dir: impl Into<PathBuf>, fsync: FsyncPolicy) -> AofConfig {
        AofConfig {
            dir: dir.into(),
            fsync,
            load: LoadPolicy::default(),
            max_record_bytes: MAX_PAYLOAD_LEN,
            rewrite: RewritePolicy::default(),
        }
    }
}

/// `--cluster-enabled yes` and its options (Redis's `cluster-*` settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `nodes.conf`: this node's id and cluster configuration, kept across restarts.
    pub config_file: PathBuf,
    /// Cluster bus port; `None`: the RESP port + 10000 (any free port when that is 0).
    pub bus_port: Option<u16>,
    /// A node silent for this long is shown `fail?`; also the bus's I/O timeout.
    pub node_timeout_ms: u64,
    /// The IP this node gives others (default: the bind address, or, when that is a
    /// wildcard, the address the first node that meets it connected to).
    pub announce_ip: Option<IpAddr>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            config_file: PathBuf::from("nodes.conf"),
            bus_port: None,
            node_timeout_ms: 15_000,
            announce_ip: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub shards: usize,
    pub bind: IpAddr,
    /// RESP port; 0 picks a free one (printed in the ready line).
    pub port: u16,
    /// Port of the flatbuffers binary protocol over TCP, if served.
    pub binary_port: Option<u16>,
    /// `--rdma ADDR:PORT`: also serve the binary protocol over RDMA (rdma_cm) there.
    pub rdma: Option<SocketAddr>,
    /// How shards learn about RDMA completions.
    pub rdma_poller: PollerMode,
    pub aof: Option<AofConfig>,
    pub requirepass: Option<String>,
    pub maxclients: usize,
    pub accept: AcceptChoice,
    pub parser_limits: ParserLimits,
    /// Requests parsed but not answered, per connection, before reading pauses.
    pub max_backlog: usize,
    /// Reply bytes not yet written, per connection, before parsing pauses.
    pub max_pending_output: usize,
    /// Redis's `client-output-buffer-limit pubsub`: unread message bytes a subscriber may
    /// leave before it is dropped.
    pub pubsub_output_limit: crate::session::OutputLimit,
    /// Requests one RESP connection handles per round before it lets the rest of its shard run
    /// (`--budget N|unlimited`; default 64 units of work, a request's keys or elements, no
    /// byte limit).
    pub conn_budget: Budget,
    pub sweep_interval: Duration,
    /// Keys with a TTL examined per sweep pass.
    pub sweep_work: usize,
    /// How long an idle shard polls before it sleeps in its ring.
    pub idle_spin: Duration,
    /// Pin shard `i` to the `i`-th allowed CPU. `None` (the default): pin only when there
    /// are more CPUs than shards. Shards that occupy every CPU share them with clients, other
    /// processes and the kernel's network work; pinned, a shard cannot move off a CPU where
    /// something else runs, and every cross-shard hop to it waits (measured on a 2-CPU box:
    /// 2 pinned shards served half the requests/s of 2 unpinned ones at `-P 1`).
    pub pin: Option<bool>,
    /// Most commands (or replies) per cross-shard message; 0 = no limit, 1 = no batching.
    pub mesh_batch: usize,
    /// `--metrics ADDR`: serve the shards' counters in Prometheus text format there.
    pub metrics: Option<SocketAddr>,
    /// Cluster mode (`--cluster-enabled yes`).
    pub cluster: Option<ClusterConfig>,
    /// `--maxmemory BYTES` (0 = no limit), shared equally by the shards.
    pub maxmemory: u64,
    /// `--maxmemory-policy`: what a shard over its share does.
    pub maxmemory_policy: EvictionPolicy,
    /// `--tls-*`: Redis's TLS settings (the TLS port, certificates, the cluster bus).
    pub tls: super::tls::TlsSettings,
    /// `--protected-mode yes|no` (default yes, as Redis).
    pub protected_mode: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            shards: std::thread::available_parallelism().map_or(1, |n| n.get()),
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 6379,
            binary_port: None,
            rdma: None,
            rdma_poller: PollerMode::adaptive(),
            aof: None,
            requirepass: None,
            maxclients: 10_000,
            accept: AcceptChoice::Handoff,
            parser_limits: ParserLimits::default(),
            max_backlog: 1024,
            max_pending_output: 16 << 20,
            pubsub_output_limit: crate::session::OutputLimit::PUBSUB_DEFAULT,
            conn_budget: Budget::messages(64),
            sweep_interval: Duration::from_millis(100),
            sweep_work: 256,
            // No spinning: measured against redis-server on one vCPU (BENCHMARKS.md, fifth
            // run), a 50 us spin cost 10-25 % more CPU per request at -P 1 and -P 16 with 50
            // clients and bought latency only for a lone client (p50 31 vs 47 us).
            idle_spin: Duration::ZERO,
            pin: None,
            mesh_batch: 0,
            metrics: None,
            cluster: None,
            maxmemory: 0,
            maxmemory_policy: EvictionPolicy::NoEviction,
            tls: Default::default(),
            protected_mode: true,
        }
    }
}

impl ServerConfig {
    pub fn resp_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind, self.port)
    }

    pub fn binary_addr(&self) -> Option<SocketAddr> {
        self.binary_port
            .map(|port| SocketAddr::new(self.bind, port))
    }

    /// The cluster bus address, in cluster mode.
    pub fn cluster_bus_addr(&self) -> Option<SocketAddr> {
        let cluster = self.cluster.as_ref()?;
        let port = match (cluster.bus_port, self.port) {
            (Some(port), _) => port,
            (None, 0) => 0,
            (None, port) => port.checked_add(10_000)?,
        };
        Some(SocketAddr::new(self.bind, port))
    }

    /// Whether shard threads get pinned, given `cpus` available CPUs.
    pub fn pins(&self, cpus: usize) -> bool {
        self.pin.unwrap_or(self.shards < cpus)
    }
}

pub const USAGE: &str = "\
Usage: corewire-kv [options]

  --shards N                 shard threads (default: number of CPUs)
  --port P                   RESP port (default 6379; 0 = any free port, or no plaintext port
                             when --tls-port is set, as Redis)
  --bind ADDR                listen address (default 127.0.0.1)
  --binary-port P            also serve the flatbuffers binary protocol on TCP port P
  --rdma ADDR:PORT           also serve the binary protocol over RDMA (rdma_cm) on ADDR:PORT
  --rdma-poller MODE         polling|polling-yield|event|adaptive[:US] (default adaptive)
  --aof DIR                  enable per-shard append-only logs DIR/shard-<i>.aof
  --fsync always|everysec|no AOF fsync policy (default everysec)
  --aof-load-truncated yes|no  cut a torn last record (an incomplete write) with a warning at
                             start-up (default yes, as Redis), or refuse to start
  --aof-fix                  also cut a log at a corrupt record that has data after it (default:
                             refuse to start; the cut bytes are saved to <log>.cut-<offset>)
  --aof-max-record-bytes B   largest AOF record one write may log; bigger writes are refused
                             (default and most 4294967295)
  --aof-rewrite-percentage P rewrite a shard's AOF when it has grown P% since its last rewrite
                             (default 100; 0 = never by itself; BGREWRITEAOF always works)
  --aof-rewrite-min-size B   ... but not below this size (default 64mb; k/kb/m/mb/g/gb suffixes)
  --requirepass PW           require AUTH PW
  --maxclients N             maximum RESP clients (default 10000)
  --accept handoff|reuseport how connections reach shards (default handoff)
  --proto-max-bulk-len B     largest bulk string accepted (default 536870912)
  --maxmemory B              memory limit for the keyspace, shared equally by the shards (default 0
                             = none; k/kb/m/mb/g/gb suffixes); estimated from keys and values
  --maxmemory-policy P       past the limit: noeviction (refuse writes with OOM, default),
                             allkeys-lru or allkeys-lfu (evict sampled keys, per shard)
  --budget N|unlimited       work one RESP connection does per round before the rest of its
                             shard runs, counted in keys or elements (GET 1, an MSET of 100
                             pairs 100; fairness; default 64)
  --max-backlog N            unanswered requests per connection before reading pauses (default 1024;
                             RESP and the binary protocol)
  --max-pending-output B     unwritten reply bytes per connection before parsing pauses (default 16777216;
                             RESP and the binary protocol)
  --pubsub-output-limit HARD[:SOFT:SECONDS]
                             unread Pub/Sub bytes before a subscriber is dropped: at once past
                             HARD, or after SECONDS above SOFT (default 33554432:8388608:60, as
                             Redis's client-output-buffer-limit pubsub; 0 = no limit)
  --idle-spin-us US          how long an idle shard polls before sleeping (default 0; 50
                             lowers a lone client's latency by a third, costs CPU under load)
  --pin | --no-pin           pin shard i to CPU i, or let the kernel place shard threads
                             (default: pin only when there are more CPUs than shards)
  --mesh-batch N             most commands per cross-shard message (default 0 = no limit;
                             1 turns batching off)
  --metrics ADDR:PORT        serve the runtime's per-shard counters in Prometheus text
                             format at http://ADDR:PORT/metrics
  --cluster-enabled yes|no   Redis Cluster mode: own hash slots, redirect the others (MOVED,
                             ASK), CLUSTER commands, MIGRATE (default no)
  --cluster-config-file F    this node's id and cluster configuration, kept across restarts
                             (default nodes.conf; one file per node)
  --cluster-port P           cluster bus port (default: --port + 10000)
  --cluster-node-timeout MS  a node silent this long is shown fail? (default 15000)
  --cluster-announce-ip IP   the IP other nodes and clients are told (default: --bind, or
                             learned from the first CLUSTER MEET when bound to 0.0.0.0)
  --protected-mode yes|no    refuse clients from outside the loopback interface while no
                             password is set (default yes, as Redis)
  --tls-port P               also serve RESP over TLS on port P (Redis's tls-* flags follow)
  --tls-cert-file F          --tls-key-file F  [--tls-key-file-pass PW]  the server's
                             certificate chain and key (PEM; an encrypted key: PKCS#8)
  --tls-client-cert-file F   --tls-client-key-file F  ours on outgoing cluster links
                             (default: the server's)
  --tls-ca-cert-file F       --tls-ca-cert-dir D  CA certificates for client and peer
                             certificates
  --tls-auth-clients yes|no|optional  ask clients for a certificate (default yes)
  --tls-protocols 'TLSv1.2 TLSv1.3'  --tls-ciphersuites (TLS 1.3) --tls-ciphers (TLS 1.2,
                             OpenSSL names): what rustls has; anything else is refused
  --tls-prefer-server-ciphers yes|no  --tls-session-caching yes|no
  --tls-session-cache-size N --tls-session-cache-timeout S
  --tls-cluster yes|no       the cluster bus and MIGRATE over TLS (default no)
  --tls-replication yes|no   stored for replication (not implemented yet)
  -h, --help                 this text
";

/// Why the command line was rejected (or `--help` was asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    Help,
    MissingValue(String),
    InvalidValue { flag: String, value: String },
    UnknownFlag(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Help => f.write_str(USAGE),
            ConfigError::MissingValue(flag) => write!(f, "{flag} needs a value"),
            ConfigError::InvalidValue { flag, value } => {
                write!(f, "invalid value {value:?} for {flag}")
            }
            ConfigError::UnknownFlag(flag) => write!(f, "unknown option {flag:?}\n\n{USAGE}"),
        }
    }
}

impl std::error::Error for ConfigError {}

impl ServerConfig {
    /// Parses the arguments after the program name.
    pub fn from_args<I: IntoIterator<Item = String>>(args: I) -> Result<ServerConfig, ConfigError> {
        let mut config = ServerConfig::default();
        let mut aof_dir = None;
        let mut fsync = FsyncPolicy::EverySec;
        let mut load = LoadPolicy::default();
        let mut max_record_bytes = MAX_PAYLOAD_LEN;
        let mut rewrite = RewritePolicy::default();
        let mut cluster_enabled = false;
        let mut cluster = ClusterConfig::default();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            if flag == "-h" || flag == "--help" {
                return Err(ConfigError::Help);
            }
            if flag == "--pin" || flag == "--no-pin" {
                config.pin = Some(flag == "--pin");
                continue;
            }
            if flag == "--aof-fix" {
                load.fix = true;
                continue;
            }
            let mut value = || {
                args.next()
                    .ok_or_else(|| ConfigError::MissingValue(flag.clone()))
            };
            match flag.as_str() {
                "--shards" => config.shards = parse(&flag, value()?)?,
                "--port" => config.port = parse(&flag, value()?)?,
                "--bind" => config.bind = parse(&flag, value()?)?,
                "--binary-port" => config.binary_port = Some(parse(&flag, value()?)?),
                "--rdma" => config.rdma = Some(parse(&flag, value()?)?),
                "--metrics" => config.metrics = Some(parse(&flag, value()?)?),
                "--rdma-poller" => config.rdma_poller = parse(&flag, value()?)?,
                "--aof" => aof_dir = Some(PathBuf::from(value()?)),
                "--fsync" => fsync = parse(&flag, value()?)?,
                "--aof-load-truncated" => {
                    load.load_truncated = match value()?.to_ascii_lowercase().as_str() {
                        "yes" => true,
                        "no" => false,
                        other => {
                            return Err(ConfigError::InvalidValue {
                                flag,
                                value: other.to_owned(),
                            })
                        }
                    }
                }
                "--aof-rewrite-percentage" => rewrite.percentage = parse(&flag, value()?)?,
                "--aof-rewrite-min-size" => {
                    let size = value()?;
                    rewrite.min_size = parse_memory(&size)
                        .ok_or(ConfigError::InvalidValue { flag, value: size })?
                }
                "--aof-max-record-bytes" => {
                    let bytes = value()?;
                    max_record_bytes = match bytes.parse() {
                        Ok(n) if n > 0 && n <= MAX_PAYLOAD_LEN => n,
                        _ => return Err(ConfigError::InvalidValue { flag, value: bytes }),
                    }
                }
                "--requirepass" => config.requirepass = Some(value()?).filter(|pw| !pw.is_empty()),
                "--maxclients" => config.maxclients = parse(&flag, value()?)?,
                "--accept" => {
                    config.accept = match value()?.as_str() {
                        "handoff" => AcceptChoice::Handoff,
                        "reuseport" => AcceptChoice::ReusePort,
                        other => {
                            return Err(ConfigError::InvalidValue {
                                flag,
                                value: other.to_owned(),
                            })
                        }
                    }
                }
                "--proto-max-bulk-len" => {
                    config.parser_limits.max_bulk_len = parse(&flag, value()?)?
                }
                "--maxmemory" => {
                    let text = value()?;
                    config.maxmemory = parse_memory(&text).ok_or(ConfigError::InvalidValue {
                        flag: flag.clone(),
                        value: text,
                    })?;
                }
                "--maxmemory-policy" => config.maxmemory_policy = parse(&flag, value()?)?,
                "--budget" => config.conn_budget = parse_budget(&flag, value()?)?,
                "--max-backlog" => config.max_backlog = parse(&flag, value()?)?,
                "--max-pending-output" => config.max_pending_output = parse(&flag, value()?)?,
                "--pubsub-output-limit" => {
                    config.pubsub_output_limit = parse_output_limit(&flag, value()?)?
                }
                "--mesh-batch" => config.mesh_batch = parse(&flag, value()?)?,
                "--cluster-enabled" => cluster_enabled = yes_no(&flag, value()?)?,
                "--cluster-config-file" => cluster.config_file = PathBuf::from(value()?),
                "--cluster-port" => cluster.bus_port = Some(parse(&flag, value()?)?),
                "--cluster-node-timeout" => cluster.node_timeout_ms = parse(&flag, value()?)?,
                "--cluster-announce-ip" => cluster.announce_ip = Some(parse(&flag, value()?)?),
                "--protected-mode" => config.protected_mode = yes_no(&flag, value()?)?,
                tls if tls.starts_with("--tls-") => {
                    let text = value()?;
                    if let Err(why) = config.tls.set(&tls[2..], &text) {
                        tracing::error!(flag = %tls, %why, "bad TLS setting");
                        return Err(ConfigError::InvalidValue { flag, value: text });
                    }
                }
                "--idle-spin-us" => {
                    config.idle_spin = Duration::from_micros(parse(&flag, value()?)?)
                }
                _ => return Err(ConfigError::UnknownFlag(flag)),
            }
        }
        if config.shards == 0 {
            return Err(ConfigError::InvalidValue {
                flag: "--shards".into(),
                value: "0".into(),
            });
        }
        config.max_backlog = config.max_backlog.max(1);
        config.cluster = cluster_enabled.then_some(cluster);
        config.aof = aof_dir.map(|dir| AofConfig {
            load,
            max_record_bytes,
            rewrite,
            ..AofConfig::new(dir, fsync)
        });
        Ok(config)
    }
}

/// A size as Redis writes them in its config: bytes, or with a k/kb/m/mb/g/gb suffix (the
/// `b` forms are powers of 1024, the others of 1000, as in Redis).
/// `unlimited` or a positive number of requests per round.
fn parse_budget(flag: &str, value: String) -> Result<Budget, ConfigError> {
    match value.parse::<u32>() {
        _ if value == "unlimited" => Ok(Budget::UNLIMITED),
        Ok(n) if n > 0 => Ok(Budget::messages(n)),
        _ => Err(ConfigError::InvalidValue {
            flag: flag.to_string(),
            value,
        }),
    }
}

fn yes_no(flag: &str, value: String) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(ConfigError::InvalidValue {
            flag: flag.to_owned(),
            value,
        }),
    }
}

fn parse<T: std::str::FromStr>(flag: &str, value: String) -> Result<T, ConfigError> {
    value.parse().map_err(|_| ConfigError::InvalidValue {
        flag: flag.to_owned(),
        value,
    })
}

/// `HARD[:SOFT:SECONDS]` in bytes and seconds.
fn parse_output_limit(
    flag: &str,
    value: String,
) -> Result<crate::session::OutputLimit, ConfigError> {
    let fields: Vec<&str> = value.split(':').collect();
    let number = |text: &str| parse::<u64>(flag, text.to_owned());
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
        _ => Err(ConfigError::InvalidValue {
            flag: flag.to_owned(),
            value,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Result<ServerConfig, ConfigError> {
        ServerConfig::from_args(line.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn defaults_match_redis() {
        let config = args("").unwrap();
        assert_eq!(config.port, 6379);
        assert_eq!(config.resp_addr().to_string(), "127.0.0.1:6379");
        assert_eq!(config.aof, None);
        assert!(config.shards >= 1);
    }

    #[test]
    fn budget_is_a_count_or_unlimited() {
        assert_eq!(args("").unwrap().conn_budget, Budget::messages(64));
        assert_eq!(args("--budget 8").unwrap().conn_budget, Budget::messages(8));
        assert_eq!(
            args("--budget unlimited").unwrap().conn_budget,
            Budget::UNLIMITED
        );
        for bad in ["--budget 0", "--budget lots", "--budget -1"] {
            assert!(
                matches!(args(bad), Err(ConfigError::InvalidValue { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn every_flag_parses() {
        let config = args(
            "--shards 3 --port 0 --bind 0.0.0.0 --binary-port 7000 --aof /tmp/x --fsync always \
             --requirepass pw --maxclients 5 --accept reuseport --proto-max-bulk-len 1024 \
             --max-backlog 16 --max-pending-output 4096 --rdma 10.0.0.1:7471",
        )
        .unwrap();
        assert_eq!(config.shards, 3);
        assert_eq!(config.port, 0);
        assert_eq!(config.binary_addr().unwrap().to_string(), "0.0.0.0:7000");
        assert_eq!(
            config.aof,
            Some(AofConfig::new("/tmp/x", FsyncPolicy::Always))
        );
        assert_eq!(config.requirepass.as_deref(), Some("pw"));
        assert_eq!(config.maxclients, 5);
        assert_eq!(config.accept, AcceptChoice::ReusePort);
        assert_eq!(config.parser_limits.max_bulk_len, 1024);
        assert_eq!(config.max_backlog, 16);
        assert_eq!(config.max_pending_output, 4096);
        assert_eq!(config.rdma, Some("10.0.0.1:7471".parse().unwrap()));
        assert_eq!(config.rdma_poller, PollerMode::adaptive());
        assert_eq!(
            args("--rdma-poller event").unwrap().rdma_poller,
            PollerMode::Event
        );
    }

    #[test]
    fn aof_recovery_and_limit_flags() {
        let aof = args("--aof d --aof-load-truncated no --aof-fix --aof-max-record-bytes 1024")
            .unwrap()
            .aof
            .unwrap();
        assert_eq!(
            aof.load,
            LoadPolicy {
                load_truncated: false,
                fix: true
            }
        );
        assert_eq!(aof.max_record_bytes, 1024);
        let aof = args("--aof d --aof-rewrite-percentage 50 --aof-rewrite-min-size 64kb")
            .unwrap()
            .aof
            .unwrap();
        assert_eq!(
            aof.rewrite,
            RewritePolicy {
                percentage: 50,
                min_size: 64 << 10
            }
        );
        assert_eq!(parse_memory("64mb"), Some(64 << 20));
        assert_eq!(parse_memory("1G"), Some(1_000_000_000));
        assert_eq!(parse_memory("1000"), Some(1000));
        assert_eq!(parse_memory("mb"), None);
        let aof = args("--aof d").unwrap().aof.unwrap();
        assert_eq!(aof.load, LoadPolicy::default());
        assert_eq!(aof.max_record_bytes, MAX_PAYLOAD_LEN);
        for bad in [
            "--aof-load-truncated maybe",
            "--aof-max-record-bytes 0",
            "--aof-max-record-bytes 4294967296",
            "--aof-rewrite-min-size lots",
            "--aof-rewrite-percentage -1",
        ] {
            assert!(
                matches!(args(bad), Err(ConfigError::InvalidValue { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn cluster_flags() {
        assert_eq!(args("").unwrap().cluster, None);
        assert_eq!(args("--cluster-enabled no").unwrap().cluster, None);
        let config = args(
            "--port 7000 --cluster-enabled yes --cluster-config-file /tmp/n.conf \
             --cluster-node-timeout 2000 --cluster-announce-ip 10.0.0.5",
        )
        .unwrap();
        let cluster = config.cluster.clone().unwrap();
        assert_eq!(cluster.config_file, PathBuf::from("/tmp/n.conf"));
        assert_eq!(cluster.node_timeout_ms, 2000);
        assert_eq!(cluster.announce_ip, Some("10.0.0.5".parse().unwrap()));
        assert_eq!(config.cluster_bus_addr().unwrap().port(), 17000);
        let own_port = args("--port 0 --cluster-enabled yes --cluster-port 9").unwrap();
        assert_eq!(own_port.cluster_bus_addr().unwrap().port(), 9);
        let any = args("--port 0 --cluster-enabled yes").unwrap();
        assert_eq!(any.cluster_bus_addr().unwrap().port(), 0);
        assert!(matches!(
            args("--cluster-enabled maybe"),
            Err(ConfigError::InvalidValue { .. })
        ));
    }

    #[test]
    fn pinning_is_automatic_unless_asked() {
        let config = args("--shards 2").unwrap();
        assert!(config.pins(4));
        assert!(!config.pins(2));
        assert!(args("--shards 2 --pin").unwrap().pins(2));
        assert!(!args("--shards 2 --no-pin").unwrap().pins(4));
    }

    #[test]
    fn bad_input_is_reported() {
        assert_eq!(args("--help"), Err(ConfigError::Help));
        assert_eq!(
            args("--port"),
            Err(ConfigError::MissingValue("--port".into()))
        );
        assert!(matches!(
            args("--fsync sometimes"),
            Err(ConfigError::InvalidValue { .. })
        ));
        assert!(matches!(
            args("--shards 0"),
            Err(ConfigError::InvalidValue { .. })
        ));
        assert_eq!(
            args("--nope"),
            Err(ConfigError::UnknownFlag("--nope".into()))
        );
    }
}
