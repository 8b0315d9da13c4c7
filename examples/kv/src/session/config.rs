use std::fmt;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::resp::ParserLimits;

/// Settings shared by every connection of a server (wrap in an `Arc` once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    pub parser_limits: ParserLimits,
    /// Requests parsed but not yet answered before parsing (and reading) pauses.
    pub max_backlog: usize,
    /// Encoded reply bytes not yet taken by the glue before parsing (and reading) pauses, so
    /// a client that pipelines without reading cannot grow our memory without bound.
    pub max_pending_output: usize,
    /// Redis `requirepass`: when set, connections must AUTH first. Map Redis's empty
    /// `requirepass ""` to `None`.
    pub requirepass: Option<Bytes>,
    /// What CONFIG GET reports, name (lowercase) and value, in order; shared by every
    /// connection of the server, and changed by CONFIG SET.
    pub parameters: Parameters,
    /// How much output a Pub/Sub subscriber may leave unread (see `session/pubsub.rs`).
    pub pubsub_output_limit: super::pubsub::OutputLimit,
    /// Applies CONFIG SET of `tls-*` parameters (rebuilds the TLS configuration); `None`
    /// when the server runs no TLS, and then they are only recorded.
    pub tls_reload: Option<TlsReload>,
    /// Scripts running past the busy threshold: every connection answers BUSY meanwhile.
    pub script_busy: std::sync::Arc<crate::scripting::Busy>,
}

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
            requirepass: None,
            pubsub_output_limit: super::pubsub::OutputLimit::PUBSUB_DEFAULT,
            tls_reload: None,
            script_busy: Default::default(),
            // redis-benchmark asks for `save` and `appendonly` at start-up.
            parameters: [
                ("save", ""),
                ("appendonly", "no"),
                ("appendfsync", "everysec"),
                ("databases", "1"),
                ("maxmemory", "0"),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_owned(), Bytes::from_static(value.as_bytes())))
            .collect::<Vec<_>>()
            .into(),
        }
    }
}

impl SessionConfig {
    /// Sets (or adds) a parameter reported by CONFIG GET.
    pub fn set_parameter(&mut self, name: &str, value: impl Into<Bytes>) {
        self.parameters.set(name, value.into());
    }
}

/// The server's CONFIG parameters: one table for every connection (CONFIG SET on one is seen
/// by CONFIG GET on all), behind a mutex because connections live on different shards; it
/// is touched only by CONFIG commands, never on the data path.
#[derive(Clone, Default)]
pub struct Parameters(Arc<Mutex<Vec<(String, Bytes)>>>);

impl Parameters {
    /// Sets (or adds) `name`.
    pub fn set(&self, name: &str, value: Bytes) {
        let mut table = self.lock();
        match table.iter_mut().find(|(n, _)| n == name) {
            Some((_, existing)) => *existing = value,
            None => table.push((name.to_owned(), value)),
        }
    }

    /// The parameters whose name `keep` accepts, in table order.
    pub fn matching(&self, mut keep: impl FnMut(&str) -> bool) -> Vec<(String, Bytes)> {
        self.lock()
            .iter()
            .filter(|(name, _)| keep(name))
            .cloned()
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, Bytes)>> {
        // A panic while holding it cannot leave the table half-written (each write is one
        // assignment or push): use it anyway.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl From<Vec<(String, Bytes)>> for Parameters {
    fn from(table: Vec<(String, Bytes)>) -> Parameters {
        Parameters(Arc::new(Mutex::new(table)))
    }
}

impl PartialEq for Parameters {
    fn eq(&self, other: &Parameters) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Parameters {}

impl fmt::Debug for Parameters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.lock().iter()).finish()
    }
}
