use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::config::LiveConfig;
use crate::resp::ParserLimits;

/// Settings shared by every connection of a server (wrap in an `Arc` once).
#[derive(Debug, Clone)]
pub struct SessionConfig {
    pub parser_limits: ParserLimits,
    /// Requests parsed but not yet answered before parsing (and reading) pauses.
    pub max_backlog: usize,
    /// Encoded reply bytes not yet taken by the glue before parsing (and reading) pauses, so
    /// a client that pipelines without reading cannot grow our memory without bound.
    pub max_pending_output: usize,
    /// The server's configuration as it runs: what CONFIG GET reports and CONFIG SET changes
    /// (`requirepass`, the Pub/Sub output limit, ... are read from it), shared by every
    /// connection; it is touched by CONFIG commands and at connect and AUTH, never on the
    /// data path.
    pub live: Arc<LiveConfig>,
    /// When the server started, Unix seconds (LASTSAVE).
    pub started_unix_s: u64,
    /// What every connection shares: CLIENT PAUSE, the directory of clients by id.
    pub clients: Arc<crate::clients::ClientsShared>,
    /// Scripts running past the busy threshold: every connection answers BUSY meanwhile
    /// (its threshold is `busy-reply-threshold`, see [`SessionConfig::sync_script_busy`]).
    pub script_busy: Arc<crate::scripting::Busy>,
    /// Applies CONFIG SET of `tls-*` parameters (rebuilds the TLS configuration); `None`
    /// when the server runs no TLS, and then they are only recorded.
    pub tls_reload: Option<TlsReload>,
    /// The ACL users and log (see [`crate::acl`]).
    pub acl: Arc<crate::acl::Acl>,
    /// What a replica refuses its clients (READONLY, MASTERDOWN, LOADING).
    pub replica: Arc<crate::repl::ReplicaGate>,
    /// Answers CONFIG SET of another `port` or `bind` (see
    /// [`crate::config::live::Glue::Listen`]); `None`: refused as immutable.
    pub port_check: Option<PortCheck>,
    /// Whether a script command may write (what a WRITE pause holds it for).
    pub script_writes: ScriptWrites,
}

/// The server's hook telling whether EVAL, EVALSHA or FCALL may write, given its first
/// argument (body, SHA1 or function name): the script cache and the function libraries
/// are the server's. Installed once the server's shared state exists; until then, and for a
/// script it does not know (as Redis, which then keeps the command's own flags), yes.
#[derive(Clone, Default)]
pub struct ScriptWrites(Arc<std::sync::OnceLock<Box<ScriptWritesFn>>>);

type ScriptWritesFn = dyn Fn(&str, &[u8]) -> bool + Send + Sync;

impl ScriptWrites {
    pub fn install(&self, writes: impl Fn(&str, &[u8]) -> bool + Send + Sync + 'static) {
        // Installed once per server; a second install is a no-op.
        let _ = self.0.set(Box::new(writes));
    }

    pub fn writes(&self, command: &str, first: &[u8]) -> bool {
        self.0.get().is_none_or(|writes| writes(command, first))
    }
}

impl fmt::Debug for ScriptWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ScriptWrites")
    }
}

/// The server's hook for CONFIG SET `port` and `bind` (the new value of each that changes):
/// the reason they are refused.
#[derive(Clone)]
pub struct PortCheck(Arc<PortCheckFn>);

type PortCheckFn = dyn Fn(Option<&str>, Option<u16>) -> Result<(), String> + Send + Sync;

impl PortCheck {
    pub fn new(
        check: impl Fn(Option<&str>, Option<u16>) -> Result<(), String> + Send + Sync + 'static,
    ) -> PortCheck {
        PortCheck(Arc::new(check))
    }

    pub fn check(&self, bind: Option<&str>, port: Option<u16>) -> Result<(), String> {
        (self.0)(bind, port)
    }
}

impl fmt::Debug for PortCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PortCheck")
    }
}

impl PartialEq for PortCheck {
    fn eq(&self, other: &PortCheck) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for PortCheck {}

/// The server's hook for CONFIG SET `tls-*`: all the changes, applied together or refused
/// with the reason.
#[derive(Clone)]
pub struct TlsReload(Arc<TlsReloadFn>);

type TlsReloadFn = dyn Fn(&[(String, String)]) -> Result<(), String> + Send + Sync;

impl TlsReload {
    pub fn new(
        apply: impl Fn(&[(String, String)]) -> Result<(), String> + Send + Sync + 'static,
    ) -> TlsReload {
        TlsReload(Arc::new(apply))
    }

    pub fn apply(&self, changes: &[(String, String)]) -> Result<(), String> {
        (self.0)(changes)
    }
}

impl fmt::Debug for TlsReload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsReload")
    }
}

impl PartialEq for TlsReload {
    fn eq(&self, other: &TlsReload) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for TlsReload {}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            parser_limits: ParserLimits::default(),
            max_backlog: 1024,
            max_pending_output: 16 * 1024 * 1024,
            live: Arc::new(LiveConfig::default()),
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            clients: Arc::default(),
            tls_reload: None,
            script_busy: Default::default(),
            acl: Arc::default(),
            replica: Arc::default(),
            port_check: None,
            script_writes: ScriptWrites::default(),
        }
    }
}

impl SessionConfig {
    /// Sets (or adds) a parameter reported by CONFIG GET.
    pub fn set_parameter(&mut self, name: &str, value: impl Into<String>) {
        self.live.set(name, value);
    }

    /// With `requirepass` set (an empty password: none).
    pub fn with_requirepass(self, password: impl Into<String>) -> SessionConfig {
        let password = password.into();
        self.acl.set_requirepass(password.as_bytes());
        self.live.set("requirepass", password);
        self
    }

    /// Redis `requirepass`: when set, connections must AUTH first.
    pub fn requirepass(&self) -> Option<Bytes> {
        self.live.requirepass()
    }

    /// Copies `busy-reply-threshold` (alias `lua-time-limit`) to where running scripts read
    /// it: at start and after a CONFIG SET.
    pub fn sync_script_busy(&self) {
        if let Some(ms) =
            (self.live.get("busy-reply-threshold")).and_then(|v| v.parse::<u64>().ok())
        {
            (self.script_busy.threshold_ms).store(ms, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl PartialEq for SessionConfig {
    fn eq(&self, other: &SessionConfig) -> bool {
        self.parser_limits == other.parser_limits
            && self.max_backlog == other.max_backlog
            && self.max_pending_output == other.max_pending_output
            && Arc::ptr_eq(&self.live, &other.live)
    }
}

impl Eq for SessionConfig {}
