//! A replica's link, on the hub: how it begins (PSYNC's decision), its synchronization,
//! then its stream handed to the connection in bounded chunks.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire::runtime::{send_to, sleep, submit_to};
use corewire::sync::Notify;

use crate::repl::{decide, Decision, FullReason, LinkState, SyncCut};
use crate::server::shard::{self, now_ms};
use crate::server::sink::SinkKey;

use super::commands::LinkConf;
use super::hub::{with_hub, Replica};
use super::{CHUNK, HIGH_WATER};

/// How a link begins.
enum Start {
    /// `+CONTINUE`: the stream from the backlog is already queued.
    Continue(Bytes),
    Full {
        eof: bool,
        psync: bool,
    },
}

struct Accepted {
    start: Start,
}

corewire::runtime::shard_local! {
    static STARTS: RefCell<HashMap<u64, Accepted>> = RefCell::new(HashMap::new());
}

/// The hub's side of PSYNC/SYNC: decides, registers the replica, and returns its id (its
/// link task starts next).
pub(super) fn accept(
    shard: usize,
    sink: SinkKey,
    ip: String,
    conf: LinkConf,
    psync: Option<(Bytes, i64)>,
) -> u64 {
    with_hub(|hub| {
        let id = hub.next_id;
        hub.next_id += 1;
        let decision = match &psync {
            Some((replid, offset)) => {
                let ranges: Vec<Range<u64>> = hub.unsafe_ranges.iter().cloned().collect();
                decide(
                    &hub.identity,
                    hub.backlog.as_ref(),
                    replid,
                    *offset,
                    &ranges,
                )
            }
            None => Decision::Full(FullReason::Requested),
        };
        let mut replica = Replica {
            id,
            shard,
            sink,
            ip: ip.clone(),
            port: conf.port,
            state: LinkState::WaitBgsave,
            ack: 0,
            ack_ms: now_ms(),
            acked: false,
            out: VecDeque::new(),
            out_bytes: 0,
            conn_pending: 0,
            cut: Some(SyncCut::default()),
            sync_start: None,
            soft_since: None,
            wake: Rc::new(Notify::default()),
            dropped: false,
        };
        let start = match decision {
            Decision::Continue { from } => {
                hub.sync_partial_ok += 1;
                replica.cut = None;
                replica.state = LinkState::Online;
                replica.ack = from - 1;
                let rest = (hub.backlog.as_ref())
                    .and_then(|b| b.since(from))
                    .unwrap_or_default();
                replica.push(rest, 0);
                let line = if conf.psync2 {
                    format!("+CONTINUE {}\r\n", hub.identity.replid)
                } else {
                    "+CONTINUE\r\n".to_owned()
                };
                tracing::info!(%ip, port = conf.port, from, "partial resynchronization accepted");
                Start::Continue(Bytes::from(line))
            }
            Decision::Full(reason) => {
                hub.sync_full += 1;
                if psync
                    .as_ref()
                    .is_some_and(|(replid, _)| &replid[..] != b"?")
                {
                    hub.sync_partial_err += 1;
                }
                tracing::info!(%ip, port = conf.port, ?reason, "full resynchronization");
                Start::Full {
                    eof: conf.eof,
                    psync: psync.is_some(),
                }
            }
        };
        hub.ensure_backlog();
        hub.replicas.push(replica);
        STARTS.with(|s| s.borrow_mut().insert(id, Accepted { start }));
        hub.publish(&shard::current().shared.repl);
        id
    })
}

/// Why a link ended.
#[derive(Debug)]
pub(in crate::server) struct Gone;

/// One replica's link, on the hub: its synchronization, then its stream.
pub(super) async fn link(id: u64) {
    let Some(accepted) = STARTS.with(|s| s.borrow_mut().remove(&id)) else {
        return;
    };
    let Some((shard, sink, wake)) =
        with_hub(|hub| hub.replica(id).map(|r| (r.shard, r.sink, r.wake.clone())))
    else {
        return;
    };
    let result = async {
        match accepted.start {
            Start::Continue(line) => send(id, shard, sink, line).await?,
            Start::Full { eof, psync } => {
                crate::server::repl_sync::full_sync(id, shard, sink, eof, psync).await?
            }
        }
        stream(id, shard, sink, &wake).await
    }
    .await;
    if let Err(Gone) = result {
        tracing::debug!(id, "replica link ended");
    }
    end_link(id, shard, sink).await;
}

/// Hands the replica's queued stream to its connection, forever (until it is gone).
async fn stream(id: u64, shard: usize, sink: SinkKey, wake: &Notify) -> Result<(), Gone> {
    loop {
        let chunk = with_hub(|hub| {
            let replica = hub.replica(id)?;
            if replica.dropped {
                return None;
            }
            let mut chunk = BytesMut::new();
            while chunk.len() < CHUNK {
                let Some(bytes) = replica.out.pop_front() else {
                    break;
                };
                replica.out_bytes -= bytes.len();
                chunk.extend_from_slice(&bytes);
            }
            Some(chunk.freeze())
        });
        match chunk {
            None => return Err(Gone),
            Some(chunk) if chunk.is_empty() => wake.notified().await,
            Some(chunk) => send(id, shard, sink, chunk).await?,
        }
    }
}

/// Writes `bytes` to the replica's connection (on its shard), then waits while the
/// connection has more than [`HIGH_WATER`] unsent.
pub(in crate::server) async fn send(
    id: u64,
    shard: usize,
    sink: SinkKey,
    bytes: Bytes,
) -> Result<(), Gone> {
    send_via(shard, sink, bytes, |pending| {
        with_hub(|hub| match hub.replica(id) {
            Some(replica) if !replica.dropped => {
                replica.conn_pending = pending;
                true
            }
            _ => false,
        })
    })
    .await
}

/// [`send`] for any link: `alive` is told the connection's unsent bytes after each look
/// and says whether the link is still wanted.
pub(super) async fn send_via(
    shard: usize,
    sink: SinkKey,
    bytes: Bytes,
    mut alive: impl FnMut(usize) -> bool,
) -> Result<(), Gone> {
    let mut pending = submit_to(shard, move || async move { push_here(sink, Some(bytes)) })
        .await
        .ok()
        .flatten()
        .ok_or(Gone)?;
    // A slow replica is looked at less and less often (1 ms doubling to 16 ms).
    let mut pause = Duration::from_millis(1);
    loop {
        if !alive(pending) {
            return Err(Gone);
        }
        if pending <= HIGH_WATER {
            return Ok(());
        }
        sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(16));
        pending = submit_to(shard, move || async move { push_here(sink, None) })
            .await
            .ok()
            .flatten()
            .ok_or(Gone)?;
    }
}

/// On the connection's shard: appends `bytes` to its output; its unsent bytes, or `None`
/// if it is gone.
pub(super) fn push_here(sink: SinkKey, bytes: Option<Bytes>) -> Option<usize> {
    let sink = shard::current().sink(sink)?;
    sink.push_raw(bytes.as_deref().unwrap_or_default())
}

/// The link is over: the hub forgets the replica and its connection is closed.
async fn end_link(id: u64, shard: usize, sink: SinkKey) {
    with_hub(|hub| {
        hub.replicas.retain(|r| r.id != id);
        hub.publish(&shard::current().shared.repl);
    });
    let _ = send_to(shard, move || {
        if let Some(sink) = shard::current().sink(sink) {
            sink.kill();
        }
    })
    .await;
}
