//! The I/O glue: the sans-I/O core running on corewire's shards.
//!
//! - Each shard thread owns a [`Store`] (and, with `--aof`, its own log file written through
//!   its own io_uring ring), installed in a thread-local at start-up: no locks on the data
//!   path.
//! - A RESP connection lives on the shard that accepted it (`resp_conn`); requests for keys of
//!   other shards travel in per-shard batches (`mesh`) and their replies come back the same
//!   way; the session puts replies back in request order.
//! - The binary protocol ([`KvService`], in `binary_conn`) shares the same routing and execution.
//! - Per shard, three background tasks: the mesh flusher, the AOF writer (group commit), and
//!   the active-expiry sweep.

mod aof_dir;
mod aof_io;
mod aof_load;
mod aof_rewrite;
mod binary_conn;
mod blocking;
mod clients;
mod cluster;
pub mod config;
mod forward;
mod introspect;
pub mod logging;
mod notify;
mod protected;
mod pubsub;
mod rdb_commands;
mod rdb_file;
mod rdb_load;
mod rdb_save;
mod rdma_bytes;
mod repl_feed;
mod repl_master;
mod repl_sync;
mod replica;
mod resp_conn;
mod resp_io;
mod resp_listener;
mod scan;
mod script;
pub(crate) mod shard;
pub(crate) mod shared;
pub(crate) mod sink;
pub mod tls;
mod tracking;
mod txn;
mod walk_pace;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use corewire::runtime::accept::{AcceptMode, ListenerHandle, Placement, TcpEndpoint};
use corewire::runtime::tls::{TlsAccepted, TlsEndpoint};
use corewire::runtime::{interval, spawn_local, Runtime};
use corewire::transport::rdma::{self, RdmaConfig, RdmaEndpoint};

pub use aof_load::{AofStartError, ReplaySummary};
pub use binary_conn::{serve_connection as serve_binary_connection, KvService};
pub use config::{AcceptChoice, AofConfig, ClusterConfig, ConfigError, ServerConfig};
pub use forward::ForwardCounters;
pub use rdb_save::RdbInfo;
pub use shared::StopRequests;
pub use walk_pace::WalkFigures;

use crate::cluster::{NodeAddr, SlotMap, Topology};
use crate::session::SessionConfig;
use crate::store::{MemoryLimit, Store, StoreConfig};
use aof_io::AofShard;
use cluster::conf_file::ConfFile;
use cluster::{ClusterNode, ClusterShard};
use corewire::runtime::net::TcpListener;
use shard::Shard;
use shared::ServerShared;

/// Why the server did not start.
#[derive(Debug)]
pub enum StartError {
    /// `--rdma` was given but the RDMA transport could not start (no device, bad address...).
    RdmaUnavailable(String),
    Runtime(io::Error),
    Listen {
        addr: SocketAddr,
        error: io::Error,
    },
    /// The Unix socket (`unixsocket`) could not be bound.
    Unix {
        path: std::path::PathBuf,
        error: io::Error,
    },
    AofDir(String),
    Aof(AofStartError),
    /// The cluster configuration could not be read, locked or created.
    Cluster(String),
    /// A shard thread died during start-up.
    ShardLost(usize),
    /// The `tls-*` settings could not be used (files, names rustls does not support).
    Tls(String),
    /// The ACL file or the configuration's users could not be loaded.
    Acl(String),
    /// The RDB dump could not be read: the file, the byte offset and why (the file is left
    /// as it is).
    Rdb(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::RdmaUnavailable(why) => write!(f, "RDMA transport not available: {why}"),
            StartError::Runtime(e) => write!(f, "starting the shards: {e}"),
            StartError::Listen { addr, error } => write!(f, "listening on {addr}: {error}"),
            StartError::Unix { path, error } => {
                write!(
                    f,
                    "listening on the unix socket {}: {error}",
                    path.display()
                )
            }
            StartError::AofDir(why) => f.write_str(why),
            StartError::Aof(e) => write!(f, "{e}"),
            StartError::Cluster(why) => f.write_str(why),
            StartError::ShardLost(shard) => write!(f, "shard {shard} died during start-up"),
            StartError::Tls(why) => write!(f, "TLS: {why}"),
            StartError::Acl(why) => f.write_str(why),
            StartError::Rdb(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for StartError {}

/// A started server. Dropping it stops the shards without flushing the AOF; call
/// [`RunningServer::shutdown`] for a clean stop.
pub struct RunningServer {
    tls: Option<ListenerHandle>,
    binary: Option<ListenerHandle>,
    rdma: Option<ListenerHandle>,
    /// `--repl-rdma`: replicas' RESP connections over RDMA.
    repl_rdma: Option<ListenerHandle>,
    /// Removes the socket file when the server stops.
    unixsocket: Option<resp_listener::UnixSocket>,
    binary_server: corewire::Server,
    replay: Vec<Option<ReplaySummary>>,
    cluster_bus: Option<SocketAddr>,
    shared: Arc<ServerShared>,
    // Declared last: dropped after the listeners.
    rt: Runtime,
}

impl RunningServer {
    /// The plaintext RESP port's address (`None` when only TLS is served).
    pub fn resp_addr(&self) -> Option<SocketAddr> {
        self.shared.resp.local_addr()
    }

    /// The TLS port's address (`--tls-port`).
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls.as_ref().map(|t| t.local_addr())
    }

    pub fn binary_addr(&self) -> Option<SocketAddr> {
        self.binary.as_ref().map(|b| b.local_addr())
    }

    pub fn rdma_addr(&self) -> Option<SocketAddr> {
        self.rdma.as_ref().map(|r| r.local_addr())
    }

    /// The replication endpoint over RDMA (`--repl-rdma`).
    pub fn repl_rdma_addr(&self) -> Option<SocketAddr> {
        self.repl_rdma.as_ref().map(|r| r.local_addr())
    }

    /// The cluster bus address, in cluster mode.
    pub fn cluster_bus_addr(&self) -> Option<SocketAddr> {
        self.cluster_bus
    }

    pub fn shards(&self) -> usize {
        self.rt.shard_count()
    }

    /// Where SHUTDOWN (and the binary's signal handler) ask the owner to stop the server:
    /// wait on it, then call [`Self::shutdown`].
    pub fn stop_requests(&self) -> shared::StopRequests {
        self.shared.stop.own();
        self.shared.stop.clone()
    }

    /// What each shard replayed from its AOF (`None` without `--aof`).
    pub fn replay(&self) -> &[Option<ReplaySummary>] {
        &self.replay
    }

    /// The service set of the binary protocol: TCP (`--binary-port`) and RDMA (`--rdma`)
    /// serve it; any other [`corewire::transport::Connection`] accepted on a shard of
    /// [`Self::runtime`] can be served with [`serve_binary_connection`].
    pub fn binary_server(&self) -> corewire::Server {
        self.binary_server.clone()
    }

    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// Each shard's cross-shard batching counters.
    pub fn forward_counters(&self) -> Vec<ForwardCounters> {
        self.rt
            .spawn_on_all(|_| async { shard::current().forward.counters() })
            .into_iter()
            .map(|h| h.wait().unwrap_or_default())
            .collect()
    }

    /// Stops accepting, writes and syncs every shard's AOF, and stops the shards.
    pub fn shutdown(self) {
        for (i, c) in self.forward_counters().into_iter().enumerate() {
            tracing::info!(
                shard = i,
                job_messages = c.job_messages,
                jobs = c.job_items,
                reply_messages = c.done_messages,
                replies = c.done_items,
                "cross-shard batching"
            );
        }
        let RunningServer {
            tls,
            binary,
            rdma,
            repl_rdma,
            rt,
            shared,
            unixsocket,
            ..
        } = self;
        drop(unixsocket);
        for listener in (shared.resp.take().into_iter().chain(tls)).chain(repl_rdma) {
            listener.stop();
        }
        let saved = rt.spawn_on(0, move || async move {
            let shard = shard::current();
            rdb_commands::save_on_stop(shard.shared.clone(), shard.count).await
        });
        if saved.wait().is_err() {
            tracing::error!("the save before stopping did not run");
        }
        if let Some(binary) = binary {
            binary.stop();
        }
        if let Some(rdma) = rdma {
            rdma.stop();
        }
        let flushes = rt.spawn_on_all(|_| async {
            let shard = shard::current();
            match &shard.aof {
                Some(aof) => aof.flush().await,
                None => Ok(()),
            }
        });
        for (i, flush) in flushes.into_iter().enumerate() {
            match flush.wait() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::error!(shard = i, %error, "final AOF flush failed"),
                Err(_) => tracing::error!(shard = i, "final AOF flush did not run"),
            }
        }
        rt.shutdown();
    }
}

/// Starts the shards, replays the AOF (every shard before any connection is accepted), and
/// starts listening.
pub fn start(config: ServerConfig) -> Result<RunningServer, StartError> {
    if let Some(aof) = &config.aof {
        aof_dir::prepare(&aof.dir, config.shards).map_err(StartError::AofDir)?;
    }
    let rt = Runtime::builder()
        .shards(config.shards)
        .name("kv")
        .spin_before_park(config.idle_spin)
        .pin(config.pins(available_cpus()))
        .build()
        .map_err(StartError::Runtime)?;
    if config.rdma.is_some() || config.repl_rdma.is_some() {
        // First, so a machine without an RDMA device fails before replaying anything.
        let rdma_config = {
            let mut o = RdmaConfig::default();
            o.mode = config.rdma_poller;
            o
        };
        rdma::install(&rt, rdma_config).map_err(rdma_unavailable)?;
    }
    let tls = tls::KvTls::start(&config.tls).map_err(StartError::Tls)?;
    let session = session_config(&config, tls.clone());
    acl_start(&config, &session).map_err(StartError::Acl)?;
    let mut cluster = prepare_cluster(&config)?;
    let replica_gate = session.replica.clone();
    let shared = Arc::new(ServerShared {
        started: Instant::now(),
        tcp_port: Default::default(),
        resp: resp_listener::RespListener::new(
            config.bind_addresses.clone(),
            accept_mode(&config),
            config.conn_budget,
        ),
        aof_enabled: config.aof.is_some(),
        cluster_enabled: config.cluster.is_some(),
        maxclients: std::sync::atomic::AtomicUsize::new(config.maxclients),
        connected_clients: Default::default(),
        total_connections: Default::default(),
        rejected_connections: Default::default(),
        blocked_clients: Default::default(),
        session: Arc::new(session),
        protected_mode: config.protected_mode.into(),
        tls: tls.clone(),
        cancelling: Default::default(),
        stop: Default::default(),
        slowlog_ids: Default::default(),
        acting_for: Default::default(),
        scripting: Default::default(),
        replica: replica::ReplicaShared::new(replica_gate, config.shards),
        repl: Default::default(),
        rdb: rdb_save::RdbShared::new(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        ),
    });
    // Weak: the hook lives in the shared state it reads.
    let scripts = Arc::downgrade(&shared);
    (shared.session.script_writes).install(move |command, first| {
        (scripts.upgrade()).is_none_or(|shared| shared.scripting.writes(command, first))
    });
    // Without the AOF, the dump is the dataset (with it, Redis 7 ignores the dump).
    let dump = match &config.aof {
        Some(_) => None,
        None => Some(rdb_load::read(&config, config.shards).map_err(StartError::Rdb)?),
    };

    let map = cluster.as_ref().map(|c| Arc::new(c.topology.slot_map()));
    let replay = start_shards(&rt, &config, &shared, map, dump)?;
    if let Some(aof) = &config.aof {
        if let Err(error) = aof_dir::sync_dir(&aof.dir) {
            tracing::warn!(%error, "could not sync the AOF directory");
        }
    }

    let mode = accept_mode(&config);
    let addr = config.resp_addr();
    // `--port 0` with a TLS port turns plaintext off, as in Redis; without one it picks any
    // free port.
    let resp = if config.port == 0 && config.tls.port != 0 {
        None
    } else {
        let port = (shared.resp.start(&rt, config.port))
            .map_err(|error| StartError::Listen { addr, error })?;
        shared.tcp_port.store(port, Ordering::Relaxed);
        Some(port)
    };
    let unixsocket = match &config.unixsocket {
        None => None,
        Some(path) => Some(
            resp_listener::UnixSocket::start(&rt, path, config.unixsocketperm, config.conn_budget)
                .map_err(|error| StartError::Unix {
                    path: path.clone(),
                    error,
                })?,
        ),
    };
    let tls_listener = match (&tls, config.tls.port) {
        (Some(tls), port) if port != 0 => {
            let addr = SocketAddr::new(config.bind, port);
            let tcp = TcpEndpoint::bind(addr)
                .mode(mode.clone())
                .budget(config.conn_budget);
            Some(
                TlsEndpoint::new(tcp, tls.acceptor.clone())
                    .serve(&rt, |accepted: TlsAccepted| {
                        resp_conn::serve(accepted, shard::current())
                    })
                    .map_err(|error| StartError::Listen { addr, error })?,
            )
        }
        _ => None,
    };
    // The port clients are sent to (cluster redirections): the TLS one with `tls-cluster`.
    let client_port = match (&tls_listener, &resp) {
        (Some(tls), _) if config.tls.cluster => tls.local_addr().port(),
        (_, Some(port)) if *port != 0 => *port,
        (Some(tls), _) => tls.local_addr().port(),
        (None, _) => 0,
    };
    let cluster_bus = match cluster.take() {
        None => None,
        Some(mut prepared) => {
            let bus = prepared
                .listener
                .local_addr()
                .map_err(|error| StartError::Listen {
                    addr: config.resp_addr(),
                    error,
                })?;
            prepared.topology.update_my_addr(NodeAddr {
                ip: prepared.announce_ip.clone(),
                port: client_port,
                cport: bus.port(),
            });
            let shards = rt.shard_count();
            rt.spawn_on(0, move || async move {
                let node = ClusterNode::new(prepared.topology, prepared.file, shards);
                shard::current().cluster.node.get_or_init(|| node.clone());
                let listener = TcpListener::from_std(prepared.listener)?;
                node.start(listener).await;
                Ok::<(), std::io::Error>(())
            })
            .wait()
            .map_err(|_| StartError::ShardLost(0))?
            .map_err(|error| StartError::Listen { addr: bus, error })?;
            Some(bus)
        }
    };

    // The binary protocol's connections get RESP's bounds: at most `max_backlog` requests
    // unanswered (the server stops reading past it) and `max_pending_output` reply bytes.
    let binary_server = corewire::Server::builder()
        .service(|_shard| KvService::for_current_shard())
        .options({
            let mut o = corewire::service::ServerOptions::default();
            o.max_in_flight_per_conn = config.max_backlog;
            o.max_queued_bytes = config.max_pending_output;
            o
        })
        .build();
    let binary = match config.binary_addr() {
        None => None,
        Some(addr) => {
            if config.requirepass.is_some() {
                tracing::warn!("the binary protocol has no AUTH: --requirepass protects RESP only");
            }
            let listener = TcpEndpoint::bind(addr).mode(mode);
            Some(
                binary_server
                    .serve(&rt, listener)
                    .map_err(|error| StartError::Listen { addr, error })?,
            )
        }
    };
    let rdma = match config.rdma {
        None => None,
        Some(addr) => Some(
            binary_server
                .serve(&rt, RdmaEndpoint::bind(addr))
                .map_err(rdma_unavailable)?,
        ),
    };
    // A replica's link over RDMA is a RESP connection like any other from here on.
    let repl_rdma = match config.repl_rdma {
        None => None,
        Some(addr) => Some(
            RdmaEndpoint::bind(addr)
                .serve(&rt, |accepted| resp_conn::serve(accepted, shard::current()))
                .map_err(rdma_unavailable)?,
        ),
    };
    crate::heap::mark_startup();
    Ok(RunningServer {
        repl_rdma,
        tls: tls_listener,
        unixsocket,
        binary,
        rdma,
        binary_server,
        replay,
        cluster_bus,
        shared,
        rt,
    })
}

/// Cluster mode before the shards start: the bus port bound, `nodes.conf` loaded (or a new
/// node made) and locked.
struct PreparedCluster {
    topology: Topology,
    file: ConfFile,
    /// Bound with std (so it can move to shard 0), served through shard 0's ring.
    listener: std::net::TcpListener,
    /// This node's IP as configured; empty: learn it when met.
    announce_ip: String,
}

fn prepare_cluster(config: &ServerConfig) -> Result<Option<PreparedCluster>, StartError> {
    let (Some(cluster), Some(bus)) = (&config.cluster, config.cluster_bus_addr()) else {
        return match config.cluster {
            Some(_) => Err(StartError::Cluster(format!(
                "no cluster bus port for --port {} (port + 10000 is too big; set \
                 --cluster-port)",
                config.port
            ))),
            None => Ok(None),
        };
    };
    let listen_error = |error| StartError::Listen { addr: bus, error };
    let listener = std::net::TcpListener::bind(bus).map_err(listen_error)?;
    let local = listener.local_addr().map_err(listen_error)?;
    let announce_ip = match cluster.announce_ip {
        Some(ip) => ip.to_string(),
        None if config.bind.is_unspecified() => String::new(),
        None => config.bind.to_string(),
    };
    let addr = NodeAddr {
        ip: announce_ip.clone(),
        port: config.port,
        cport: local.port(),
    };
    let (topology, file) =
        cluster::conf_file::load_or_create(cluster, addr).map_err(StartError::Cluster)?;
    tracing::info!(
        node = %topology.myself().id,
        file = %file.path().display(),
        bus = %local,
        "cluster mode"
    );
    Ok(Some(PreparedCluster {
        topology,
        file,
        listener,
        announce_ip,
    }))
}

fn accept_mode(config: &ServerConfig) -> AcceptMode {
    match config.accept {
        AcceptChoice::ReusePort => AcceptMode::ReusePort,
        AcceptChoice::Handoff => AcceptMode::handoff(Placement::LeastConnections),
    }
}

fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn rdma_unavailable(error: rdma::RdmaError) -> StartError {
    StartError::RdmaUnavailable(error.to_string())
}

fn session_config(config: &ServerConfig, tls: Option<Arc<tls::KvTls>>) -> SessionConfig {
    // The options as read at start-up, with the effective settings of those the server
    // config holds (a server started from code sets the fields, not the options).
    let mut values = config.options.clone();
    let (appendonly, fsync) = match &config.aof {
        Some(aof) => ("yes", aof.fsync.as_str()),
        None => ("no", "everysec"),
    };
    let load_truncated = config
        .aof
        .as_ref()
        .is_none_or(|aof| aof.load.load_truncated);
    let rewrite = config
        .aof
        .as_ref()
        .map(|aof| aof.rewrite)
        .unwrap_or_default();
    let limit = config.pubsub_output_limit;
    let mut obuf = crate::config::value::OutputBufferLimits::parse(
        values
            .named("client-output-buffer-limit")
            .unwrap_or_default(),
    )
    .unwrap_or_default();
    obuf.pubsub = (limit.hard as u64, limit.soft as u64, limit.soft_ms / 1000);
    let dir = if config.dir.as_os_str().is_empty() {
        std::env::current_dir().unwrap_or_default()
    } else {
        config.dir.clone()
    };
    for (name, value) in [
        ("appendonly", appendonly.to_owned()),
        ("appendfsync", fsync.to_owned()),
        (
            "aof-load-truncated",
            if load_truncated { "yes" } else { "no" }.to_owned(),
        ),
        (
            "auto-aof-rewrite-percentage",
            rewrite.percentage.to_string(),
        ),
        ("auto-aof-rewrite-min-size", rewrite.min_size.to_string()),
        ("maxclients", config.maxclients.to_string()),
        ("maxmemory", config.maxmemory.to_string()),
        (
            "maxmemory-policy",
            config.maxmemory_policy.name().to_owned(),
        ),
        ("port", config.port.to_string()),
        (
            "proto-max-bulk-len",
            config.parser_limits.max_bulk_len.to_string(),
        ),
        (
            "requirepass",
            config.requirepass.clone().unwrap_or_default(),
        ),
        (
            "cluster-enabled",
            if config.cluster.is_some() {
                "yes"
            } else {
                "no"
            }
            .to_owned(),
        ),
        ("client-output-buffer-limit", obuf.to_string()),
        ("dir", dir.display().to_string()),
        ("shards", config.shards.to_string()),
        (
            "protected-mode",
            if config.protected_mode { "yes" } else { "no" }.to_owned(),
        ),
    ] {
        values.set_named(name, value);
    }
    for (name, value) in config.tls.parameters() {
        values.set_named(name, value);
    }
    let live = crate::config::LiveConfig::new(values, config.config_file.clone());
    let session = SessionConfig {
        parser_limits: config.parser_limits,
        max_backlog: config.max_backlog,
        max_pending_output: config.max_pending_output,
        live: Arc::new(live),
        tls_reload: tls.map(|tls| {
            crate::session::TlsReload::new(move |changes: &[(String, String)]| tls.apply(changes))
        }),
        port_check: Some(port_check(config)),
        ..SessionConfig::default()
    };
    session.sync_script_busy();
    session.replica.configure(&session.live);
    session
}

/// CONFIG SET `port` and `bind`: the plaintext listener moves there (see
/// `resp_listener.rs`). In cluster mode the address is the node's in the cluster, so another
/// one is refused: as Redis refuses it when nothing could listen there, else as immutable.
fn port_check(config: &ServerConfig) -> crate::session::PortCheck {
    let (bind, cluster) = (config.bind, config.cluster.is_some());
    crate::session::PortCheck::new(move |new_bind, port| {
        const NO_BIND: &str = "Failed to bind to specified addresses.";
        const NO_PORT: &str = "Unable to listen on this port. Check server logs.";
        if cluster {
            if let Some(port) = port {
                if let Err(error) = std::net::TcpListener::bind(SocketAddr::new(bind, port)) {
                    tracing::warn!(%error, port, "CONFIG SET port: cannot listen there");
                    return Err(NO_PORT.into());
                }
            }
            return Err("can't set immutable config".into());
        }
        let new_bind = match new_bind {
            None => None,
            Some(addresses) => Some(crate::config::bind::parse(addresses).map_err(|_| NO_BIND)?),
        };
        let shared = shard::current().shared.clone();
        let moves_bind = new_bind.is_some();
        match shared.resp.move_to(new_bind, port) {
            Ok(port) => {
                shared.tcp_port.store(port, Ordering::Relaxed);
                Ok(())
            }
            Err(error) => {
                tracing::warn!(%error, ?port, "CONFIG SET: cannot listen there");
                Err(if moves_bind { NO_BIND } else { NO_PORT }.into())
            }
        }
    })
}

/// The users at start: `requirepass` as the default user's password, then the
/// configuration's `user` lines or the ACL file (not both, as Redis refuses).
fn acl_start(config: &ServerConfig, session: &SessionConfig) -> Result<(), String> {
    let acl = &session.acl;
    if let Some(password) = &config.requirepass {
        acl.set_requirepass(password.as_bytes());
    }
    let live = &session.live;
    let allchannels = live.get("acl-pubsub-default").as_deref() == Some("allchannels");
    let aclfile = live.get("aclfile").filter(|file| !file.is_empty());
    if !config.acl_users.is_empty() {
        if aclfile.is_some() {
            return Err(
                "Configuring Redis with users defined in redis.conf and at the same \
                        setting an ACL file path is invalid. This setup is very likely to lead \
                        to configuration errors and security holes, please define either an \
                        ACL file or declare users directly in your redis.conf, but not both."
                    .into(),
            );
        }
        let users = crate::acl::file::configured(
            &config.acl_users,
            allchannels,
            &mut || acl.new_identity(),
            &acl.users(),
        )?;
        let _ = acl.update(|current| -> Result<(), ()> {
            *current = users;
            Ok(())
        });
    }
    if let Some(file) = aclfile {
        let dir = live.get("dir").unwrap_or_default();
        let path = std::path::Path::new(&dir).join(&file);
        let text = std::fs::read(&path)
            .map_err(|e| format!("Error loading ACLs, opening file '{}': {e}", path.display()))?;
        let default_identity = acl.users().default_user().identity;
        let users =
            crate::acl::file::parse(&text, &file, allchannels, default_identity, &mut || {
                acl.new_identity()
            })?;
        let _ = acl.update(|current| -> Result<(), ()> {
            *current = users;
            Ok(())
        });
    }
    Ok(())
}

/// Builds every shard's state on its own thread (replaying its AOF there, through its ring),
/// all shards in parallel, and waits for all of them.
fn start_shards(
    rt: &Runtime,
    config: &ServerConfig,
    shared: &Arc<ServerShared>,
    cluster_map: Option<Arc<SlotMap>>,
    dump: Option<rdb_load::Loaded>,
) -> Result<Vec<Option<ReplaySummary>>, StartError> {
    let count = rt.shard_count();
    let mut dump_parts = match dump {
        Some(dump) => {
            shared.rdb.loaded(dump.keys, dump.expired);
            if let Some(functions) = &dump.functions {
                script::restore_logged(shared, functions);
            }
            dump.per_shard.into_iter().map(Some).collect()
        }
        None => Vec::new(),
    };
    let handles: Vec<_> = (0..count)
        .map(|id| {
            let shared = shared.clone();
            let aof = config.aof.clone();
            let store_config = StoreConfig {
                max_value_len: config.parser_limits.max_bulk_len,
                memory: MemoryLimit {
                    max_bytes: config.maxmemory.div_ceil(count as u64),
                    policy: config.maxmemory_policy,
                    ..MemoryLimit::default()
                },
                ..StoreConfig::default()
            };
            let sweep_interval = config.sweep_interval;
            let mesh_batch = config.mesh_batch;
            let sweep_work = config.sweep_work;
            let cluster_map = cluster_map.clone();
            let dump_part = dump_parts.get_mut(id).and_then(Option::take);
            rt.spawn_on(id, move || async move {
                let mut store = Store::new(store_config);
                if let Some(part) = dump_part {
                    rdb_load::apply(&mut store, part);
                }
                let (aof, summary) = match aof {
                    None => (None, None),
                    Some(aof) => {
                        let (log, summary) = AofShard::open(&aof, id, &mut store).await?;
                        if let Some(payload) = &summary.functions {
                            script::restore_logged(&shared, payload);
                        }
                        tracing::info!(
                            shard = id,
                            files = summary.files,
                            records = summary.records,
                            bytes = summary.valid_len,
                            truncated = summary.truncated,
                            "AOF replayed"
                        );
                        (Some(log), Some(summary))
                    }
                };
                if cluster_map.is_some() {
                    store.enable_slot_index();
                }
                let shard = shard::install(Rc::new(Shard::new(
                    id,
                    count,
                    shared,
                    store,
                    aof,
                    mesh_batch,
                    ClusterShard::new(cluster_map),
                )));
                // The run-time settings as configured (CONFIG SET sends later changes).
                shard.apply_settings(&shard.shared.session.live.shard_settings());
                spawn_local(forward::run_flusher(shard.clone()));
                spawn_local(tracking::run_flusher(shard.clone()));
                if id == 0 {
                    spawn_local(rdb_commands::run_save_points(shard.clone()));
                    replica::start_configured(&shard);
                    repl_master::start_hub();
                }
                if shard.aof.is_some() {
                    spawn_local(aof_io::run_aof(shard.clone()));
                    spawn_local(aof_rewrite::run_rewrites(shard.clone()));
                }
                spawn_local(async move {
                    let mut tick = interval(sweep_interval);
                    let per_second = (1000 / sweep_interval.as_millis().max(1)).max(1);
                    let mut ticks = 0u128;
                    loop {
                        tick.tick().await;
                        shard.sweep(sweep_work);
                        ticks += 1;
                        if ticks.is_multiple_of(per_second) {
                            // What bursts freed goes back to the system even while the
                            // shard is idle (see `heap`).
                            crate::heap::collect(false);
                        }
                    }
                });
                Ok::<_, AofStartError>(summary)
            })
        })
        .collect();
    let mut summaries = Vec::with_capacity(count);
    for (id, handle) in handles.into_iter().enumerate() {
        match handle.wait() {
            Ok(Ok(summary)) => summaries.push(summary),
            Ok(Err(error)) => return Err(StartError::Aof(error)),
            Err(_) => return Err(StartError::ShardLost(id)),
        }
    }
    Ok(summaries)
}
