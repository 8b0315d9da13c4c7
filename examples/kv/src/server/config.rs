//! The settings a server starts with ([`ServerConfig`], filled from the configuration file
//! and the command line by [`crate::config::load`]) and why a start-up configuration is refused.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use corewire::runtime::Budget;
use corewire::transport::rdma::PollerMode;

use crate::aof::{FsyncPolicy, LoadPolicy, RewritePolicy, MAX_PAYLOAD_LEN};
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
    /// `cluster-require-full-coverage`: the cluster is down while a slot has no working
    /// owner.
    pub require_full_coverage: bool,
    /// `cluster-replica-no-failover`: this node, as a replica, never replaces its primary
    /// by itself (CLUSTER FAILOVER still works).
    pub replica_no_failover: bool,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            config_file: PathBuf::from("nodes.conf"),
            bus_port: None,
            node_timeout_ms: 15_000,
            announce_ip: None,
            require_full_coverage: true,
            replica_no_failover: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub shards: usize,
    /// The first of `bind_addresses` (0.0.0.0 when there are none): where the TLS, binary
    /// and cluster bus ports listen.
    pub bind: IpAddr,
    /// Where the plaintext RESP port listens (`bind`); none: it does not.
    pub bind_addresses: Vec<crate::config::bind::BindAddr>,
    /// A Unix socket RESP clients may connect to as well (`unixsocket`).
    pub unixsocket: Option<PathBuf>,
    /// The Unix socket's permissions (`unixsocketperm`; 0: as the umask leaves them).
    pub unixsocketperm: u32,
    /// RESP port; 0 picks a free one (printed in the ready line).
    pub port: u16,
    /// Port of the flatbuffers binary protocol over TCP, if served.
    pub binary_port: Option<u16>,
    /// `--rdma ADDR:PORT`: also serve the binary protocol over RDMA (rdma_cm) there.
    pub rdma: Option<SocketAddr>,
    /// `--repl-rdma ADDR:PORT`: serve replicas with `repl-transport rdma` (RESP, so PSYNC,
    /// over RDMA) there; see `server/rdma_bytes.rs`.
    pub repl_rdma: Option<SocketAddr>,
    /// How shards learn about RDMA completions.
    pub rdma_poller: PollerMode,
    pub aof: Option<AofConfig>,
    pub requirepass: Option<String>,
    /// The configuration's `user` lines: each the username, then its ACL rules.
    pub acl_users: Vec<Vec<String>>,
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
    /// `pidfile`: written at start-up, removed at a clean stop.
    pub pidfile: Option<PathBuf>,
    /// `disable-thp` (default yes): the process asks the kernel for no transparent huge
    /// pages (see `heap::disable_thp`).
    pub disable_thp: bool,
    /// `logfile`: where the log goes (`None`: standard error).
    pub logfile: Option<PathBuf>,
    /// `loglevel`: Redis's level name.
    pub loglevel: String,
    /// `enable-debug-command`: DEBUG is refused unless set.
    pub enable_debug_command: bool,
    /// `timeout`: idle clients are closed after this long (zero: never).
    pub timeout: Duration,
    /// `dir`: the working directory, absolute (relative paths were resolved against it).
    pub dir: PathBuf,
    /// The configuration file the server was started with (CONFIG REWRITE writes it).
    pub config_file: Option<PathBuf>,
    /// Every option's value as read at start-up (CONFIG GET reports them; the fields above
    /// win for the options they hold).
    pub options: crate::config::Values,
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
            bind_addresses: vec![crate::config::bind::BindAddr {
                ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                optional: false,
            }],
            unixsocket: None,
            unixsocketperm: 0,
            port: 6379,
            binary_port: None,
            rdma: None,
            repl_rdma: None,
            rdma_poller: PollerMode::adaptive(),
            aof: None,
            requirepass: None,
            acl_users: Vec::new(),
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
            pidfile: None,
            disable_thp: true,
            logfile: None,
            loglevel: "notice".into(),
            enable_debug_command: false,
            timeout: Duration::ZERO,
            dir: PathBuf::new(),
            config_file: None,
            options: crate::config::Values::default(),
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

/// Why the command line was rejected (or `--help` or `--version` was asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// `--help` or `--version`: the text to print on standard output (not a failure).
    Info(String),
    /// A command line the parser could not read (an unknown flag, a missing value): clap's
    /// message, with the usage and, for a misspelt flag, a suggestion.
    CommandLine(String),
    /// Everything wrong with the configuration file and the command line, one line each.
    Problems(Vec<String>),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Info(text) | ConfigError::CommandLine(text) => f.write_str(text),
            ConfigError::Problems(problems) => {
                f.write_str("*** FATAL CONFIG ERROR ***")?;
                for problem in problems {
                    write!(f, "\n{problem}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ConfigError {}

impl ServerConfig {
    /// Reads the arguments after the program name: an optional Redis configuration file,
    /// then `--name value` options (see [`crate::config::load`]).
    pub fn from_args<I: IntoIterator<Item = String>>(args: I) -> Result<ServerConfig, ConfigError> {
        crate::config::load::from_args(args).map(|loaded| loaded.config)
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
        // `bind * -::*`: every IPv4 address, and every IPv6 one where there is IPv6.
        assert_eq!(config.resp_addr().to_string(), "0.0.0.0:6379");
        assert_eq!(
            config.bind_addresses,
            crate::config::bind::parse(crate::config::bind::DEFAULT).unwrap()
        );
        assert_eq!(config.bind_addresses.len(), 2);
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
            assert!(matches!(args(bad), Err(ConfigError::Problems(_))), "{bad}");
        }
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
        let aof = args("--aof d --auto-aof-rewrite-percentage 50 --auto-aof-rewrite-min-size 64kb")
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
        let aof = args("--aof d").unwrap().aof.unwrap();
        assert_eq!(aof.load, LoadPolicy::default());
        assert_eq!(aof.max_record_bytes, MAX_PAYLOAD_LEN);
        for bad in [
            "--aof-load-truncated maybe",
            "--aof-max-record-bytes 0",
            "--aof-max-record-bytes 4294967296",
            "--auto-aof-rewrite-min-size lots",
            "--auto-aof-rewrite-percentage -1",
        ] {
            assert!(matches!(args(bad), Err(ConfigError::Problems(_))), "{bad}");
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
            Err(ConfigError::Problems(_))
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
        assert!(matches!(args("--help"), Err(ConfigError::Info(help)) if help.contains("--port")));
        assert!(matches!(args("--port"), Err(ConfigError::CommandLine(_))));
        assert!(matches!(
            args("--fsync sometimes"),
            Err(ConfigError::Problems(_))
        ));
        assert!(matches!(args("--shards 0"), Err(ConfigError::Problems(_))));
        let Err(ConfigError::CommandLine(message)) = args("--nope") else {
            panic!("--nope accepted");
        };
        assert!(message.contains("'--nope'"), "{message}");
    }
}
