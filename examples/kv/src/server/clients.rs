//! CLIENT LIST and CLIENT KILL on a shard: each shard lists or kills its own connections
//! (the router broadcasts the request and merges the parts; the caller's session answers for
//! the caller). A killed connection's subscriptions, watches and blocked waits are released
//! at once (`Shard::unregister`, as when a connection closes; blocked waits on other shards
//! through the cross-shard cancels), and its task is woken to close the socket at its next
//! turn, however idle or blocked it was.

use super::shard::{now_ms, Shard};
use super::sink::SinkKey;
use crate::command::{ClientsBroadcast, ClientsOp};
use crate::reply::Reply;
use bytes::Bytes;

impl Shard {
    /// This shard's part: `[id, line, ...]` for LIST, the number killed for KILL.
    pub(crate) fn clients_part(&self, request: &ClientsBroadcast) -> Reply {
        let now = now_ms();
        let clients = self.sinks().into_iter().filter_map(|(key, sink)| {
            let line = sink.client_line(now)?;
            (line.id != request.caller).then_some((key, sink, line))
        });
        match &request.op {
            ClientsOp::List { query, .. } => Reply::Array(
                clients
                    .filter(|(_, _, line)| query.matches(line))
                    .flat_map(|(_, _, line)| {
                        [
                            Reply::Integer(line.id as i64),
                            Reply::Bulk(Bytes::from(line.format())),
                        ]
                    })
                    .collect(),
            ),
            ClientsOp::Kill { filter, .. } => {
                let mut killed = 0;
                for (key, sink, line) in clients {
                    if filter.matches(&line, false) {
                        sink.kill();
                        // Its state goes now, as in Redis: a PUBLISH or a push right after
                        // the reply finds no subscriber or waiter of it.
                        self.unregister(key);
                        killed += 1;
                    }
                }
                Reply::Integer(killed)
            }
            ClientsOp::AclRefresh { .. } => {
                for (key, sink, _) in clients {
                    if sink.acl_revoked() {
                        sink.kill();
                        self.unregister(key);
                    }
                }
                Reply::ok()
            }
            ClientsOp::Unblock { target, error } => {
                let reply = if *error {
                    Reply::error("UNBLOCKED client unblocked via CLIENT UNBLOCK")
                } else {
                    super::blocking::timed_out()
                };
                let sink = SinkKey::unpack(target.handle);
                Reply::Integer(i64::from(self.unblock_waits(target.shard, sink, reply)))
            }
        }
    }
}
