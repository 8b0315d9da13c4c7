//! Commands the connection answers itself, without touching a shard.

use super::{Lifecycle, Session};
use crate::cluster::slots::key_slot;
use crate::cluster::ClusterRequest;
use crate::command::{Command, CommandError};
use crate::introspect::{self, Request};
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
            Command::Select(index) => {
                select_reply(index, &self.config.live, self.cluster.is_some())
            }
            Command::Cluster(request) => self.run_cluster_local(request),
            Command::ConfigGet(patterns) => crate::config::get(&self.config.live, &patterns),
            Command::ConfigRewrite => crate::config::rewrite_command(&self.config.live),
            Command::Help { command, lines } => {
                let container = command.split('|').next().unwrap_or(command);
                introspect::help_reply(&container.to_ascii_uppercase(), lines)
            }
            Command::Introspect(request) => self.introspect(request),
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
            // Inside EXEC: the change is made; connections notice it at their next command.
            Command::Acl(request) => match self.acl_command(request, seq) {
                super::Admission::Answered(reply) => reply,
                super::Admission::Forward(_) => Reply::ok(),
            },
            other => CommandError::NotShardCommand {
                command: other.name(),
            }
            .into(),
        }
    }

    /// RESET (Redis 6.2): database 0 (the only one), cluster READWRITE, no name, and
    /// authenticated again only if no password is required. The id and library info stay.
    pub(super) fn reset(&mut self) -> Reply {
        self.reset_user();
        if let Some(gate) = &mut self.cluster {
            gate.set_readonly(false);
        }
        self.identity.reset();
        self.reset_pubsub();
        self.reset_tracking();
        self.reply_mode = super::ReplyMode::On;
        if self.modes.monitor {
            self.modes.monitor = false;
            self.modes.monitor_changed = true;
        }
        Reply::simple("RESET")
    }
}

impl Session {
    /// The introspection commands a connection answers itself.
    fn introspect(&mut self, request: Request) -> Reply {
        match request {
            Request::Command(query) => introspect::command::answer(query),
            Request::Time => introspect::time_reply(self.unix_us),
            Request::Monitor => {
                if !self.modes.monitor {
                    self.modes.monitor = true;
                    self.modes.monitor_changed = true;
                }
                Reply::ok()
            }
            Request::Help(container, lines) => introspect::help_reply(container, lines),
            other => CommandError::NotShardCommand {
                command: other.name(),
            }
            .into(),
        }
    }

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

/// SELECT's answer, for a client and for a script alike. One keyspace split over shards, as
/// Redis Cluster splits it over nodes: only database 0 exists. Out of `databases`' range a
/// standalone server answers Redis's range error (what scripts and clients check for); any
/// other index gets Redis Cluster's refusal.
pub(crate) fn select_reply(index: i64, live: &crate::config::LiveConfig, cluster: bool) -> Reply {
    if index == 0 {
        return Reply::ok();
    }
    let databases = (live.get("databases"))
        .and_then(|n| n.parse::<i64>().ok())
        .unwrap_or(16);
    if !cluster && (index < 0 || index >= databases) {
        CommandError::DbIndexOutOfRange.into()
    } else {
        CommandError::SelectInCluster.into()
    }
}
