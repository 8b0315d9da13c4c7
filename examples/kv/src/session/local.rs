//! Commands the connection answers itself, without touching a shard.

use bytes::Bytes;

use super::{Lifecycle, Session};
use crate::cluster::slots::key_slot;
use crate::cluster::ClusterRequest;
use crate::command::table;
use crate::command::{Command, CommandError, CommandQuery};
use crate::glob::glob_match;
use crate::reply::Reply;

impl Session {
    pub(super) fn run_local(&mut self, command: Command, seq: u64) -> Reply {
        match command {
            Command::Ping(None) => Reply::simple("PONG"),
            Command::Ping(Some(message)) | Command::Echo(message) => Reply::Bulk(message),
            Command::Auth { username, password } => self.auth(username, &password),
            Command::Quit => {
                self.lifecycle = Lifecycle::ClosingAfter(seq);
                Reply::ok()
            }
            Command::Select(0) => Reply::ok(),
            // One keyspace split over shards, as Redis Cluster splits it over nodes: any other
            // index gets Redis Cluster's answer, standalone or not (issue 13).
            Command::Select(_) => CommandError::SelectInCluster.into(),
            Command::Cluster(request) => self.run_cluster_local(request),
            Command::ConfigGet(patterns) => self.config_get(&patterns),
            Command::Introspect(query) => introspect(query),
            Command::Client(request) => match self.client_request(request, seq) {
                super::Admission::Answered(reply) => reply,
                super::Admission::Forward(command) => CommandError::NotShardCommand {
                    command: command.name(),
                }
                .into(),
            },
            // Only reachable from EXEC: outside MULTI `admit` runs these.
            Command::ConfigSet(_) => Reply::error("ERR CONFIG SET inside MULTI is not supported"),
            Command::Hello(_) => Reply::error("ERR HELLO inside MULTI is not supported"),
            other => CommandError::NotShardCommand {
                command: other.name(),
            }
            .into(),
        }
    }

    /// Redis 7 semantics with only the `default` user: without `requirepass` it is a
    /// `nopass` user (any password works with the two-argument form).
    pub(super) fn auth(&mut self, username: Option<Bytes>, password: &[u8]) -> Reply {
        let default_user = username.as_deref().is_none_or(|name| name == b"default");
        match &self.config.requirepass {
            None if username.is_none() => CommandError::AuthNotConfigured.into(),
            None if default_user => Reply::ok(),
            Some(expected) if default_user && constant_time_eq(expected, password) => {
                self.authenticated = true;
                Reply::ok()
            }
            _ => CommandError::WrongPass.into(),
        }
    }

    /// RESET (Redis 6.2): database 0 (the only one), cluster READWRITE, no name, and
    /// authenticated again only if no password is required. The id and library info stay.
    pub(super) fn reset(&mut self) -> Reply {
        self.authenticated = self.config.requirepass.is_none();
        if let Some(gate) = &mut self.cluster {
            gate.set_readonly(false);
        }
        self.identity.reset();
        self.reset_pubsub();
        Reply::simple("RESET")
    }

    fn config_get(&self, patterns: &[Bytes]) -> Reply {
        let mut items = Vec::new();
        let matching = self.config.parameters.matching(|name| {
            patterns
                .iter()
                .any(|pattern| glob_match(pattern, name.as_bytes(), true))
        });
        for (name, value) in matching {
            items.push(Reply::Bulk(Bytes::from(name)));
            items.push(Reply::Bulk(value));
        }
        Reply::Array(items)
    }
}

impl Session {
    /// KEYSLOT, ASKING, READONLY, READWRITE (the session refused them without cluster mode).
    fn run_cluster_local(&mut self, request: ClusterRequest) -> Reply {
        let Some(gate) = &mut self.cluster else {
            return CommandError::ClusterDisabled.into();
        };
        match request {
            ClusterRequest::KeySlot(key) => Reply::Integer(i64::from(key_slot(&key))),
            ClusterRequest::Asking => {
                gate.set_asking();
                Reply::ok()
            }
            ClusterRequest::ReadOnly => {
                gate.set_readonly(true);
                Reply::ok()
            }
            ClusterRequest::ReadWrite => {
                gate.set_readonly(false);
                Reply::ok()
            }
            other => CommandError::NotShardCommand {
                command: other.name(),
            }
            .into(),
        }
    }
}

fn introspect(query: CommandQuery) -> Reply {
    match query {
        CommandQuery::List => Reply::Array(table::all().map(|spec| spec.info_reply()).collect()),
        CommandQuery::Count => Reply::Integer(table::all().count() as i64),
        // No documentation is shipped; redis-cli accepts an empty reply and shows no hints.
        CommandQuery::Docs(_) => Reply::Array(Vec::new()),
        CommandQuery::GetKeys(request) => match crate::command::key_positions(&request) {
            Err(crate::command::CommandError::WrongArity { .. }) => {
                Reply::error("ERR Invalid number of arguments specified for command")
            }
            Err(_) => Reply::error("ERR Invalid command specified"),
            Ok(positions) if positions.is_empty() => {
                Reply::error("ERR The command has no key arguments")
            }
            Ok(positions) => Reply::Array(
                positions
                    .into_iter()
                    .map(|i| Reply::Bulk(request[i].clone()))
                    .collect(),
            ),
        },
        CommandQuery::Info(names) if names.is_empty() => introspect(CommandQuery::List),
        CommandQuery::Info(names) => Reply::Array(
            names
                .iter()
                .map(|name| table::find(name).map_or(Reply::NullBulk, |spec| spec.info_reply()))
                .collect(),
        ),
    }
}

/// Compares without an early exit, so response timing does not reveal the password prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
