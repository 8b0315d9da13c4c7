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
    /// What CONFIG GET reports, name (lowercase) and value, in order.
    pub parameters: Vec<(String, Bytes)>,
    /// How much output a Pub/Sub subscriber may leave unread (see `session/pubsub.rs`).
    pub pubsub_output_limit: super::pubsub::OutputLimit,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            parser_limits: ParserLimits::default(),
            max_backlog: 1024,
            max_pending_output: 16 * 1024 * 1024,
            requirepass: None,
            pubsub_output_limit: super::pubsub::OutputLimit::PUBSUB_DEFAULT,
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
            .collect(),
        }
    }
}

impl SessionConfig {
    /// Sets (or adds) a parameter reported by CONFIG GET.
    pub fn set_parameter(&mut self, name: &str, value: impl Into<Bytes>) {
        let value = value.into();
        match self.parameters.iter_mut().find(|(n, _)| n == name) {
            Some((_, existing)) => *existing = value,
            None => self.parameters.push((name.to_owned(), value)),
        }
    }
}
