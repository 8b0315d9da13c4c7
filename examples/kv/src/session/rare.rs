//! The per-connection state most connections never use — the name AUTH was spelled with, a
//! restricted user's queued arguments, a protocol error to report, tracking's reads queued
//! behind their keys, CLIENT PAUSE's held request, a SHUTDOWN in flight, MONITOR lines,
//! blocking pops — kept in one box beside the session: an idle connection then holds only
//! what every connection needs (the box is dropped once it is empty again, see
//! [`Session::release_idle_buffers`]).

use std::collections::VecDeque;

use bytes::Bytes;

use super::{Request, Session};

#[derive(Debug, Default)]
pub(super) struct Rare {
    /// AUTH or HELLO as the client spelled it (ACL LOG's object for a failed AUTH).
    pub auth_name: Option<Bytes>,
    /// A restricted user's request being queued by MULTI: its arguments, for EXEC's check.
    pub acl_queued_args: Option<Vec<Bytes>>,
    /// Why parsing stopped, until the glue takes it to report (count and log) it.
    pub protocol_error: Option<String>,
    /// Requests already admitted, to dispatch next (a read that a tracking connection sends
    /// after the keys it reads).
    pub queued: VecDeque<Request>,
    /// The request CLIENT PAUSE holds back, parsed, and until when the pause lasts.
    pub postponed: Option<(Vec<Bytes>, Option<Bytes>)>,
    pub paused_until: Option<crate::clients::PauseHold>,
    /// A SHUTDOWN in flight: a success is not answered (the connection closes, as Redis's
    /// does when it exits), a refusal is.
    pub shutdown: Option<u64>,
    /// MONITOR lines of the commands answered, for the glue (see `calls.rs`).
    pub monitor_lines: Vec<Bytes>,
    /// Blocking pops sent and not answered yet (CLIENT LIST's `b` flag).
    pub blocking: Vec<u64>,
}

impl Rare {
    /// Nothing held: the box may go.
    pub(super) fn is_empty(&self) -> bool {
        self.auth_name.is_none()
            && self.acl_queued_args.is_none()
            && self.protocol_error.is_none()
            && self.queued.is_empty()
            && self.postponed.is_none()
            && self.paused_until.is_none()
            && self.shutdown.is_none()
            && self.monitor_lines.is_empty()
            && self.blocking.is_empty()
    }
}

impl Session {
    /// The rare state, boxed on first use.
    pub(super) fn rare(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// Drops the rare state's box once nothing is in it.
    pub(super) fn release_rare(&mut self) {
        if self.rare.as_ref().is_some_and(|rare| rare.is_empty()) {
            self.rare = None;
        }
    }

    /// While CLIENT PAUSE holds the next request: until when (Unix ms). The glue retries
    /// then (or sooner, for an UNPAUSE).
    pub fn paused_until(&self) -> Option<u64> {
        Some(self.rare.as_ref()?.paused_until.as_ref()?.until_ms)
    }

    /// Whether CLIENT PAUSE holds a request like `args` now.
    pub(super) fn pause_hold(&self, args: &[Bytes]) -> Option<u64> {
        if !self.config.clients.is_paused(self.unix_us / 1000) {
            return None;
        }
        let name = crate::command::Command::table_name(args).ok()?;
        // A request of the wrong arity is refused at once, as Redis checks it first.
        let fits = crate::introspect::meta::find(name).is_none_or(|meta| {
            let least = meta.arity.unsigned_abs() as usize;
            args.len() == least || (meta.arity < 0 && args.len() > least)
        });
        if !fits {
            return None;
        }
        let script = || {
            let first = args.get(1).map_or(&[][..], |arg| &arg[..]);
            self.config.script_writes.writes(name, first)
        };
        let writes = crate::clients::held_by_write_pause(name, script)
            || (name == "exec" && self.txn.queues_writes(&self.config.script_writes));
        self.config
            .clients
            .paused_until(self.unix_us / 1000, writes)
    }
}
