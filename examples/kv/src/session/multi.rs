//! MULTI/EXEC/DISCARD/WATCH/UNWATCH on the connection, with Redis 7's rules for what is
//! queued, what is refused at once, and what aborts EXEC:
//!
//! - between MULTI and EXEC every command is answered `QUEUED` and kept here; errors Redis
//!   finds before queueing (unknown command, arity, NOAUTH, a cluster redirect) are answered
//!   at once and make EXEC fail with `EXECABORT`; errors Redis finds only when the command
//!   runs (a syntax error in its options, a bad integer) are kept and come out inside
//!   EXEC's reply, without aborting the rest;
//! - MULTI and WATCH inside MULTI are refused without aborting; QUIT and RESET are not queued;
//! - EXEC submits [`Command::Transaction`]: the glue runs it without any other client's
//!   command in between on the shards it touches, and checks the watches there (a changed
//!   watched key makes the reply a null array). Connection-level commands in the queue
//!   (PING, ECHO, CLIENT SETNAME, ...) are answered when EXEC is, in their place.
//!
//! WATCH registers the keys on the shards owning them (the glue remembers where), and
//! UNWATCH, DISCARD, EXEC and RESET drop them; so that UNWATCH costs nothing for a connection
//! that never watched, the session knows whether it may be watching.
//!
//! While an EXEC is in flight no later request is dispatched: a request pipelined after EXEC
//! must not run before the transaction on a shard the transaction has not locked yet.

use super::calls::Frame;
use super::resp3::{shape_of, Shape};
use super::{Admission, Session};
use bytes::Bytes;

use crate::command::{Command, CommandError, Scope, Transaction, TxnItem};
use crate::reply::Reply;

/// A connection between MULTI and EXEC.
#[derive(Debug, Default)]
pub(super) struct Queue {
    items: Vec<Queued>,
    /// Each item's name and request, for the statistics when EXEC runs them.
    calls: Vec<(Option<&'static str>, Frame)>,
    /// An error at queue time: EXEC answers EXECABORT and runs nothing.
    aborted: bool,
    /// Each item's arguments when the user is restricted: EXEC checks them again.
    acl_args: Vec<Option<Vec<Bytes>>>,
}

#[derive(Debug)]
enum Queued {
    Run(Command),
    /// Redis would refuse it when it runs: its place in EXEC's reply holds this error.
    Failed(Reply),
}

/// MULTI's state plus the bookkeeping EXEC and the watches need.
#[derive(Debug, Default)]
pub(super) struct TxnState {
    /// Boxed: most connections never send MULTI (see `PubSubState`).
    queue: Option<Box<Queue>>,
    /// WATCH was sent since the last UNWATCH/EXEC/DISCARD/RESET.
    watching: bool,
    /// While EXEC builds the transaction: how many commands it holds (CLIENT LIST/INFO run
    /// inside it see the connection still in MULTI, as in Redis).
    executing: Option<u32>,
    /// The EXEC whose reply is awaited; nothing after it is dispatched until then.
    exec_in_flight: Option<u64>,
    /// Requests sent to the shards only to drop the watches (UNWATCH's reply is OK) whose
    /// client-visible reply is another one: EXECABORT, or RESET's.
    overrides: Vec<(u64, Reply)>,
}

fn exec_abort() -> Reply {
    Reply::error("EXECABORT Transaction discarded because of previous errors.")
}

impl TxnState {
    pub(super) fn in_multi(&self) -> bool {
        self.queue.is_some()
    }

    /// Commands queued since MULTI; `None` outside MULTI.
    pub(super) fn queued(&self) -> Option<usize> {
        self.queue
            .as_ref()
            .map(|queue| queue.items.len())
            .or(self.executing.map(|n| n as usize))
    }

    pub(super) fn exec_in_flight(&self) -> bool {
        self.exec_in_flight.is_some()
    }

    /// Whether the transaction queued so far writes (what a WRITE pause holds EXEC for).
    pub(super) fn queues_writes(&self, scripts: &super::config::ScriptWrites) -> bool {
        self.queue.as_ref().is_some_and(|queue| {
            queue.items.iter().any(|item| match item {
                Queued::Run(command) => {
                    let script = || match command {
                        Command::Script(script) => {
                            let first = script.args.first().map_or(&[][..], |arg| &arg[..]);
                            scripts.writes(command.name(), first)
                        }
                        _ => true,
                    };
                    crate::clients::held_by_write_pause(command.name(), script)
                }
                Queued::Failed(_) => false,
            })
        })
    }

    /// The reply the client sees for `seq`, given the shards' `reply`.
    pub(super) fn client_reply(&mut self, seq: u64, reply: Reply) -> Reply {
        if self.exec_in_flight == Some(seq) {
            self.exec_in_flight = None;
        }
        match self.overrides.iter().position(|(s, _)| *s == seq) {
            Some(i) => self.overrides.swap_remove(i).1,
            None => reply,
        }
    }
}

impl Session {
    /// MULTI, EXEC, DISCARD, WATCH and UNWATCH outside MULTI (any other command is admitted
    /// by its scope).
    #[inline]
    pub(super) fn admit_txn_control(&mut self, command: Command, seq: u64) -> Admission {
        match command {
            Command::Multi => {
                self.txn.queue = Some(Box::default());
                Admission::Answered(Reply::ok())
            }
            Command::Exec => Admission::Answered(Reply::error("ERR EXEC without MULTI")),
            Command::Discard => Admission::Answered(Reply::error("ERR DISCARD without MULTI")),
            Command::Watch(keys) => {
                self.txn.watching = true;
                Admission::Forward(Command::Watch(keys))
            }
            Command::Unwatch => self.unwatch(seq, Reply::ok()),
            command => self.admit_scoped(command, seq),
        }
    }

    /// Forgets the watches (on the shards only if there may be any), answering `reply`.
    fn unwatch(&mut self, seq: u64, reply: Reply) -> Admission {
        if !std::mem::take(&mut self.txn.watching) {
            return Admission::Answered(reply);
        }
        if reply != Reply::ok() {
            self.txn.overrides.push((seq, reply));
        }
        Admission::Forward(Command::Unwatch)
    }

    /// RESET's part: out of MULTI, no watches. `reply` is RESET's own.
    pub(super) fn reset_txn(&mut self, seq: u64, reply: Reply) -> Admission {
        self.txn.queue = None;
        self.unwatch(seq, reply)
    }

    /// A request refused before it runs (a replica's READONLY/MASTERDOWN/LOADING, a busy
    /// script) that arrived inside MULTI: EXEC discards the transaction with the refusal as
    /// its reason, anything else answers the refusal and flags the transaction, as Redis does.
    pub(super) fn refuse_in_multi(
        &mut self,
        mut args: Vec<Bytes>,
        refusal: Reply,
        seq: u64,
    ) -> Admission {
        if args[0].eq_ignore_ascii_case(b"exec") {
            let Reply::Error(text) = refusal else {
                return Admission::Answered(refusal);
            };
            let reply = Reply::error(format!(
                "EXECABORT Transaction discarded because of: {}",
                String::from_utf8_lossy(&text)
            ));
            return self.reset_txn(seq, reply);
        }
        let (name, parsed) = Command::parse_named(&mut args);
        self.identity.last_command = name;
        self.admit_queued(parsed, Some(refusal), seq)
    }

    /// A request between MULTI and EXEC. `parsed` is the parse result, `rejected` an error
    /// Redis gives before queueing (unknown command, arity, NOAUTH, a redirect) if any.
    pub(super) fn admit_queued(
        &mut self,
        parsed: Result<Command, CommandError>,
        rejected: Option<Reply>,
        seq: u64,
    ) -> Admission {
        let refuse = |state: &mut TxnState, reply: Reply| {
            if let Some(queue) = state.queue.as_mut() {
                queue.aborted = true;
            }
            Admission::Answered(reply)
        };
        if let Some(reply) = rejected {
            return refuse(&mut self.txn, reply);
        }
        let command = match parsed {
            Ok(command) => command,
            Err(error) => return self.queue(Queued::Failed(error.into()), seq),
        };
        match command {
            Command::Multi => {
                Admission::Answered(Reply::error("ERR MULTI calls can not be nested"))
            }
            Command::Watch(_) => {
                Admission::Answered(Reply::error("ERR WATCH inside MULTI is not allowed"))
            }
            Command::Exec => self.exec(seq),
            // Redis runs them at EXEC; here a subscription is refused inside a transaction.
            Command::Subscription(subscription) => self.queue(
                Queued::Failed(Reply::error(format!(
                    "ERR {} inside MULTI is not supported",
                    subscription.name().to_uppercase()
                ))),
                seq,
            ),
            Command::Discard => {
                self.txn.queue = None;
                self.unwatch(seq, Reply::ok())
            }
            Command::Quit => Admission::Answered(self.run_local(command, seq)),
            Command::Reset => {
                let reply = self.reset();
                self.reset_txn(seq, reply)
            }
            command => {
                let command = self.with_script_user(command);
                self.queue(Queued::Run(command), seq)
            }
        }
    }

    /// Queues `item` (request `seq`): it is answered QUEUED, and counts as a call only when
    /// EXEC runs it.
    fn queue(&mut self, item: Queued, seq: u64) -> Admission {
        let name = self.identity.last_command;
        let frame = self
            .replies
            .slot(seq)
            .map(|slot| std::mem::take(&mut slot.call.frame))
            .unwrap_or_default();
        self.uncount(seq);
        let acl_args = self
            .rare
            .as_mut()
            .and_then(|rare| rare.acl_queued_args.take());
        if let Some(queue) = self.txn.queue.as_mut() {
            queue.items.push(item);
            queue.calls.push((name, frame));
            queue.acl_args.push(acl_args);
        }
        Admission::Answered(Reply::simple("QUEUED"))
    }

    fn exec(&mut self, seq: u64) -> Admission {
        let queue = self.txn.queue.take().unwrap_or_default();
        if queue.aborted {
            return self.unwatch(seq, exec_abort());
        }
        self.exec_calls(seq, queue.calls);
        let mut items = Vec::with_capacity(queue.items.len());
        let mut shapes = Vec::new();
        // A queue of 2^32 commands would not fit in memory; saturate all the same.
        self.txn.executing = Some(u32::try_from(queue.items.len()).unwrap_or(u32::MAX));
        let mut acl_args = queue.acl_args.into_iter();
        for item in queue.items {
            // The rules may have changed since the command was queued.
            let item = match (item, acl_args.next().flatten()) {
                (Queued::Run(command), Some(args)) => match self.acl_recheck(&args) {
                    Some(refusal) => Queued::Failed(refusal),
                    None => Queued::Run(command),
                },
                (item, _) => item,
            };
            if self.resp3 {
                shapes.push(match &item {
                    Queued::Run(command) => shape_of(command),
                    Queued::Failed(_) => Shape::Plain,
                });
            }
            items.push(match item {
                Queued::Failed(reply) => TxnItem::Answered(reply),
                // EXEC drops the watches anyway (after checking them).
                Queued::Run(Command::Unwatch) => TxnItem::Answered(Reply::ok()),
                Queued::Run(Command::Client(request)) => match self.client_request(request, seq) {
                    Admission::Answered(reply) => TxnItem::Answered(reply),
                    Admission::Forward(command) => TxnItem::Run(command),
                },
                // Checked when EXEC runs, as Redis runs it: an error takes its place in the
                // reply; what the shards apply goes with the transaction.
                Queued::Run(Command::ConfigSet(pairs)) => match self.config_set(pairs) {
                    Admission::Answered(reply) => TxnItem::Answered(reply),
                    Admission::Forward(command) => TxnItem::Run(command),
                },
                Queued::Run(command) if command.scope() == Scope::Connection => {
                    TxnItem::Answered(self.run_local(command, seq))
                }
                Queued::Run(command) => TxnItem::Run(command),
            });
        }
        self.txn.executing = None;
        let encoding = self.encoding(Shape::Exec(shapes));
        self.replies.set_encoding(seq, encoding);
        // The glue checks and drops this connection's watches with the transaction.
        self.txn.watching = false;
        self.txn.exec_in_flight = Some(seq);
        Admission::Forward(Command::Transaction(Box::new(Transaction { items })))
    }
}
