//! MIGRATE on the shard that holds the keys.
//!
//! 1. In one turn: the live keys are serialised ([`Store::dump`]) and locked. Commands that
//!    touch a locked key wait in [`Migrations`] (they would otherwise change a value already
//!    on its way, or read one about to leave).
//! 2. A task sends `RESTORE-ASKING key ttl payload [REPLACE]` for each (`RESTORE` without
//!    cluster mode) on a connection to the target, through the shard's ring, and reads the
//!    answers, each within the timeout.
//! 3. Back in one turn: the keys the target acknowledged are deleted (logged as DEL, and
//!    under `appendfsync always` the reply waits for the fsync), the lock is released and
//!    the waiting commands run: their keys are gone, so they are redirected (ASK) to the
//!    new owner. No acknowledged write is lost or applied twice.
//!
//! Connections to targets are kept for reuse (Redis keeps them 10 s); one in use is taken
//! out of the pool, so two MIGRATEs never share one.
//!
//! [`Store::dump`]: crate::store::Store::dump

use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::peer::PeerStream;
use bytes::{Bytes, BytesMut};
use corewire::runtime::{spawn_local, timeout};

use super::super::shard::{self, now_ms, Shard};
use super::super::sink::Origin;
use crate::cluster::command::{ClusterRequest, Migrate};
use crate::command::Command;
use crate::reply::Reply;
use crate::resp::{self, parse_reply};

/// Idle connections to targets are closed after this (Redis's `MIGRATE_SOCKET_CACHE_TTL`).
const POOL_IDLE: Duration = Duration::from_secs(10);
/// Idle connections kept per target.
const POOL_PER_TARGET: usize = 4;
/// Largest reply read from a target (they answer +OK or an error line).
const MAX_REPLY: usize = 64 * 1024;

/// Keys locked by MIGRATEs in flight on this shard, the commands waiting for them, and the
/// connections to targets.
#[derive(Default)]
pub(crate) struct Migrations {
    locked: RefCell<HashSet<Bytes>>,
    /// Bounded by the connections' own limits: each waits with at most its backlog.
    waiting: RefCell<VecDeque<(Origin, Command)>>,
    pool: RefCell<HashMap<SocketAddr, Vec<(PeerStream, Instant)>>>,
}

impl Migrations {
    /// Whether the command touches a key a MIGRATE holds (asked per command: inlined, one
    /// branch while no MIGRATE runs).
    #[inline]
    pub fn holds_any(&self, command: &Command) -> bool {
        let locked = self.locked.borrow();
        !locked.is_empty() && command.keys().iter().any(|key| locked.contains(*key))
    }

    pub fn defer(&self, origin: Origin, command: Command) {
        self.waiting.borrow_mut().push_back((origin, command));
    }

    fn lock(&self, keys: &[Bytes]) {
        self.locked.borrow_mut().extend(keys.iter().cloned());
    }

    /// Releases `keys` and runs the commands that waited (those still blocked by another
    /// MIGRATE wait again, in order).
    fn release(&self, shard: &Shard, keys: &[Bytes]) {
        {
            let mut locked = self.locked.borrow_mut();
            for key in keys {
                locked.remove(key);
            }
        }
        let waiting = std::mem::take(&mut *self.waiting.borrow_mut());
        let now = now_ms();
        for (origin, command) in waiting {
            if let Some(reply) = shard.execute(origin, command, now) {
                shard.deliver(origin, reply);
            }
        }
    }

    fn take_connection(&self, addr: SocketAddr) -> Option<PeerStream> {
        let mut pool = self.pool.borrow_mut();
        let idle = pool.get_mut(&addr)?;
        idle.retain(|(_, since)| since.elapsed() < POOL_IDLE);
        idle.pop().map(|(stream, _)| stream)
    }

    fn return_connection(&self, addr: SocketAddr, stream: PeerStream) {
        let mut pool = self.pool.borrow_mut();
        let idle = pool.entry(addr).or_default();
        idle.retain(|(_, since)| since.elapsed() < POOL_IDLE);
        if idle.len() < POOL_PER_TARGET {
            idle.push((stream, Instant::now()));
        }
    }
}

/// One key on its way: name, milliseconds to live (0: none), payload.
struct Outgoing {
    key: Bytes,
    ttl_ms: u64,
    payload: Bytes,
}

/// Step 1 (see the module docs). `None`: the reply follows when the transfer is done.
pub(super) fn start(shard: &Shard, origin: Origin, request: Migrate, now: u64) -> Option<Reply> {
    if let Some(refusal) = shard.aof.as_ref().and_then(|aof| aof.refusal()) {
        return Some(Reply::error(format!(
            "MISCONF Errors writing to the AOF file: {refusal}"
        )));
    }
    // In cluster mode the keys share a slot, hence a shard; without it they may not.
    let elsewhere = request
        .keys
        .iter()
        .any(|key| crate::routing::shard_of(key, shard.count) != shard.id);
    if elsewhere {
        return Some(Reply::error(
            "ERR MIGRATE's keys must live on one shard: give them one {hash tag}",
        ));
    }
    let batch: Vec<Outgoing> = shard.with_store(|store| {
        request
            .keys
            .iter()
            .filter_map(|key| {
                let (payload, expire_at) = store.dump(key, now)?;
                Some(Outgoing {
                    key: key.clone(),
                    ttl_ms: expire_at.map_or(0, |at| at.saturating_sub(now).max(1)),
                    payload,
                })
            })
            .collect()
    });
    if batch.is_empty() {
        return Some(Reply::simple("NOKEY"));
    }
    let keys: Vec<Bytes> = batch.iter().map(|o| o.key.clone()).collect();
    shard.cluster.migrations.lock(&keys);
    let cluster = shard.cluster.is_enabled();
    spawn_local(async move {
        let shard = shard::current();
        let outcome = transfer(&shard, &request, &batch, cluster).await;
        let (moved, reply) = match outcome {
            Ok(answers) => acknowledged(&batch, answers, request.copy),
            Err(error) => (Vec::new(), error),
        };
        let commit = Command::Cluster(ClusterRequest::MigrateCommit { keys: moved, reply });
        if let Some(reply) = shard.execute_plain(origin, commit, now_ms()) {
            shard.deliver(origin, reply);
        }
        shard.cluster.migrations.release(&shard, &keys);
    });
    None
}

/// The keys to delete here (those the target took, unless COPY) and MIGRATE's reply: OK,
/// or the first error the target gave.
fn acknowledged(batch: &[Outgoing], answers: Vec<Reply>, copy: bool) -> (Vec<Bytes>, Reply) {
    let mut moved = Vec::new();
    let mut first_error = None;
    for (outgoing, answer) in batch.iter().zip(answers) {
        match answer {
            Reply::Error(text) => {
                first_error.get_or_insert_with(|| target_error(&text));
            }
            _ if !copy => moved.push(outgoing.key.clone()),
            _ => {}
        }
    }
    (moved, first_error.unwrap_or_else(Reply::ok))
}

fn target_addr(request: &Migrate) -> Option<SocketAddr> {
    let host = std::str::from_utf8(&request.host).ok()?;
    let ip = match host {
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        other => other.parse().ok()?,
    };
    let port = std::str::from_utf8(&request.port).ok()?.parse().ok()?;
    Some(SocketAddr::new(ip, port))
}

fn io_error(what: &str) -> Reply {
    Reply::error(format!("IOERR error or timeout {what}"))
}

/// Why an exchange with the target failed.
enum Failure {
    /// The connection was closed or reset before any reply came back: a cached connection
    /// the target had dropped, worth one retry on a new one (Redis does the same).
    ClosedBeforeReply,
    /// MIGRATE's reply.
    Reply(Reply),
}

/// Step 2: the target's answer to each key, in order. `Err`: the MIGRATE's reply.
async fn transfer(
    shard: &Shard,
    request: &Migrate,
    batch: &[Outgoing],
    cluster: bool,
) -> Result<Vec<Reply>, Reply> {
    let step = Duration::from_millis(request.timeout_ms);
    let addr = target_addr(request).ok_or_else(|| io_error("connecting to the client"))?;
    let out = restore_requests(request, batch, cluster);
    let expected = batch.len() + usize::from(request.auth.is_some());
    let pool = &shard.cluster.migrations;
    let mut cached = pool.take_connection(addr);
    loop {
        let retry_allowed = cached.is_some();
        let stream = match cached.take() {
            Some(stream) => stream,
            None => match timeout(step, PeerStream::connect(addr)).await {
                Ok(Ok(stream)) => stream,
                _ => return Err(io_error("connecting to the client")),
            },
        };
        match exchange(&stream, out.clone(), expected, step).await {
            Ok(mut replies) => {
                if request.auth.is_some() {
                    if let Reply::Error(text) = replies.remove(0) {
                        return Err(target_error(&text));
                    }
                }
                pool.return_connection(addr, stream);
                return Ok(replies);
            }
            Err(Failure::ClosedBeforeReply) if retry_allowed => continue,
            Err(Failure::ClosedBeforeReply) => return Err(io_error("reading from target node")),
            Err(Failure::Reply(reply)) => return Err(reply),
        }
    }
}

fn target_error(text: &[u8]) -> Reply {
    Reply::error(format!(
        "ERR Target instance replied with error: {}",
        String::from_utf8_lossy(text)
    ))
}

/// `[AUTH ...]` then `RESTORE-ASKING key ttl payload [REPLACE]` (`RESTORE` outside cluster
/// mode) for each key, as one buffer.
fn restore_requests(request: &Migrate, batch: &[Outgoing], cluster: bool) -> Bytes {
    let mut out = BytesMut::new();
    if let Some((user, password)) = &request.auth {
        let mut args: Vec<&[u8]> = vec![b"AUTH"];
        args.extend(user.as_deref());
        args.push(password);
        write_command(&mut out, &args);
    }
    let name: &[u8] = if cluster {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    for outgoing in batch {
        let ttl = outgoing.ttl_ms.to_string();
        let mut args: Vec<&[u8]> = vec![name, &outgoing.key, ttl.as_bytes(), &outgoing.payload];
        if request.replace {
            args.push(b"REPLACE");
        }
        write_command(&mut out, &args);
    }
    out.freeze()
}

/// Sends the requests and reads `expected` replies, each step within `step`.
async fn exchange(
    stream: &PeerStream,
    out: Bytes,
    expected: usize,
    step: Duration,
) -> Result<Vec<Reply>, Failure> {
    match timeout(step, stream.send_all(out)).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => return Err(Failure::ClosedBeforeReply),
        Err(_) => return Err(Failure::Reply(io_error("writing to target instance"))),
    }
    let reading = || Failure::Reply(io_error("reading from target node"));
    let mut replies = Vec::with_capacity(expected);
    let mut buf = BytesMut::new();
    while replies.len() < expected {
        match parse_reply(&mut buf, MAX_REPLY) {
            Ok(Some(reply)) => {
                replies.push(reply);
                continue;
            }
            Ok(None) => {}
            Err(_) => return Err(reading()),
        }
        let result = match timeout(step, stream.read_into(&mut buf)).await {
            Ok(done) => done,
            Err(_) => return Err(reading()),
        };
        match result {
            Ok(n) if n > 0 => {}
            // Closed or reset with nothing answered: most likely a cached connection the
            // target dropped. (If it did apply them, the retry gets BUSYKEY, and the keys
            // stay here: visible, never lost.)
            _ if replies.is_empty() && buf.is_empty() => return Err(Failure::ClosedBeforeReply),
            _ => return Err(reading()),
        }
    }
    Ok(replies)
}

fn write_command(out: &mut BytesMut, args: &[&[u8]]) {
    resp::write_array_header(out, args.len());
    for arg in args {
        resp::write_bulk(out, arg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outgoing(key: &str) -> Outgoing {
        Outgoing {
            key: Bytes::from(key.to_owned()),
            ttl_ms: 0,
            payload: Bytes::new(),
        }
    }

    #[test]
    fn only_acknowledged_keys_leave() {
        let batch = [outgoing("a"), outgoing("b"), outgoing("c")];
        let answers = vec![Reply::ok(), Reply::error("BUSYKEY x"), Reply::ok()];
        let (moved, reply) = acknowledged(&batch, answers.clone(), false);
        assert_eq!(moved, vec![Bytes::from("a"), Bytes::from("c")]);
        assert_eq!(
            reply,
            Reply::error("ERR Target instance replied with error: BUSYKEY x")
        );
        let (moved, _) = acknowledged(&batch, answers, true);
        assert!(moved.is_empty(), "COPY keeps every key");
        let (_, reply) = acknowledged(&batch, vec![Reply::ok(); 3], false);
        assert_eq!(reply, Reply::ok());
    }
}
