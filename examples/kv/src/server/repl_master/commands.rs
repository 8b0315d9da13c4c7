//! The replication commands on the shard of the connection that sent them: ROLE, WAIT,
//! REPLCONF, PSYNC and SYNC; and a closed replica connection.

use std::cell::RefCell;
use std::collections::HashMap;

use bytes::Bytes;
use corewire::runtime::{send_to, spawn_local, submit_to};

use crate::repl::command::ReplConf;
use crate::repl::ReplRequest;
use crate::repl::{shard_link, shards};
use crate::reply::Reply;
use crate::server::repl_feed::FeedItem;
use crate::server::shard::{self, now_ms, Shard};
use crate::server::sink::{Origin, SinkKey};

use super::hub::with_hub;
use super::link::{accept, link, push_here};

corewire::runtime::shard_local! {
    /// This shard's WAITs, numbered (see [`FeedItem::Wait`]).
    static WAIT_IDS: std::cell::Cell<u64> = std::cell::Cell::new(0);
    /// This shard's connections that are replicas (their links are on the hub), and what
    /// each connection said with REPLCONF before its PSYNC.
    static LINKS: RefCell<HashMap<SinkKey, LinkConf>> = RefCell::new(HashMap::new());
}

#[derive(Debug, Clone, Default)]
pub(super) struct LinkConf {
    pub(super) port: u16,
    pub(super) ip: Option<String>,
    pub(super) eof: bool,
    pub(super) psync2: bool,
    pub(super) replica: bool,
    /// The connection is this master shard's link (`REPLCONF ... shard <i>`, accepted).
    pub(super) shard_link: Option<usize>,
}

/// Runs a replication command for the connection at `origin` on its shard. `None`: the
/// reply comes later.
pub(in crate::server) fn dispatch(
    shard: &Shard,
    origin: Origin,
    request: ReplRequest,
) -> Option<Reply> {
    match request {
        // A replica answers with its link (see `server/replica`).
        ReplRequest::Role => Some(
            match shard.shared.replica.info(&shard.shared.session.live) {
                Some(link) => link.role_reply(),
                None => shard.shared.repl.info().role_reply(),
            },
        ),
        ReplRequest::Wait { .. } if shard.shared.replica.is_replica() => Some(Reply::error(
            "ERR WAIT cannot be used with replica instances. Please also note that since \
             Redis 4.0 if a replica is configured to be writable (which is not the default) \
             writes to replicas are just local and are not propagated.",
        )),
        ReplRequest::Wait {
            replicas,
            timeout_ms,
        } => {
            let id = WAIT_IDS.with(|ids| {
                ids.set(ids.get() + 1);
                ids.get()
            });
            let parts = shard.count;
            let mark = move || FeedItem::Wait {
                origin,
                id,
                parts,
                replicas,
                timeout_ms,
                shard_offset: 0,
            };
            // Every shard marks it behind its writes: the ones this client's writes made
            // there ran before the WAIT reached it.
            crate::server::repl_feed::wait_mark(mark());
            let here = shard.id;
            spawn_local(async move {
                for target in (0..parts).filter(|&s| s != here) {
                    let item = mark();
                    let _ =
                        send_to(target, move || crate::server::repl_feed::wait_mark(item)).await;
                }
            });
            None
        }
        ReplRequest::ReplConf(options) => replconf(shard, origin, options),
        ReplRequest::Psync { replid, offset } => {
            psync(shard, origin, Some((replid, offset)));
            // Unanswered here: the link writes `+FULLRESYNC` or `+CONTINUE` itself.
            Some(Reply::ok())
        }
        ReplRequest::Sync => {
            psync(shard, origin, None);
            Some(Reply::ok())
        }
    }
}

fn replconf(shard: &Shard, origin: Origin, options: Vec<ReplConf>) -> Option<Reply> {
    let mut ack = None;
    let (mut offered, mut key_map, mut offer) = (None, None, false);
    let mut link_shard = None;
    LINKS.with(|links| {
        let mut links = links.borrow_mut();
        let conf = links.entry(origin.sink).or_default();
        for option in options {
            match option {
                ReplConf::ListeningPort(port) => conf.port = port,
                ReplConf::IpAddress(ip) => {
                    conf.ip = Some(String::from_utf8_lossy(&ip).into_owned())
                }
                ReplConf::Capa(capa) if capa.eq_ignore_ascii_case(b"eof") => conf.eof = true,
                ReplConf::Capa(capa) if capa.eq_ignore_ascii_case(b"psync2") => conf.psync2 = true,
                ReplConf::Ack(offset) if conf.replica => ack = Some(offset),
                ReplConf::ShardStreams(n) => (offered, offer) = (Some(n), true),
                ReplConf::KeyMap(map) => (key_map, offer) = (Some(map), true),
                ReplConf::Shard(i) => link_shard = Some(i),
                _ => {}
            }
        }
    });
    if let Some(offset) = ack {
        let (from, sink) = (origin.shard, origin.sink);
        let link = LINKS.with(|links| links.borrow().get(&sink).and_then(|c| c.shard_link));
        spawn_local(async move {
            let _ = match link {
                Some(i) => send_to(i, move || super::shard_link::on_ack(from, sink, offset)).await,
                None => send_to(0, move || on_ack(from, sink, offset)).await,
            };
        });
    }
    if offer {
        let local = shards::Local {
            shards: shard.count,
            serves: super::shard_link::served(),
            follows_master: shard.shared.replica.is_replica(),
        };
        if let Some(i) = link_shard {
            let answer = shard_link::decide_link(offered, key_map.as_deref(), i, &local);
            tracing::info!(?answer, "a replica shard asked for its own link");
            if let shard_link::LinkAnswer::Link(i) = answer {
                LINKS.with(|links| {
                    if let Some(conf) = links.borrow_mut().get_mut(&origin.sink) {
                        conf.shard_link = Some(i);
                    }
                });
            }
            let line = answer.line();
            return Some(match line.strip_prefix('-') {
                Some(error) => Reply::error(error),
                None => Reply::Simple(Bytes::copy_from_slice(&line.as_bytes()[1..])),
            });
        }
        let answer = shards::decide(offered, key_map.as_deref(), &local);
        tracing::info!(?answer, "a replica offered per-shard streams");
        let line = answer.line();
        let status = line.strip_prefix('+').unwrap_or(&line);
        return Some(Reply::Simple(Bytes::copy_from_slice(status.as_bytes())));
    }
    Some(Reply::ok())
}

/// A replica's `REPLCONF ACK`, on the hub.
fn on_ack(shard: usize, sink: SinkKey, offset: u64) {
    let now = now_ms();
    with_hub(|hub| {
        if let Some(replica) =
            (hub.replicas.iter_mut()).find(|r| r.shard == shard && r.sink == sink)
        {
            replica.ack = replica.ack.max(offset);
            replica.ack_ms = now;
            replica.acked = true;
        }
        hub.answer_waits(now);
    });
}

/// PSYNC (`Some`) or SYNC (`None`): the hub takes the connection as a replica. A replica
/// whose own link is down has no stream to offer (Redis: `-NOMASTERLINK`; the sub-replica
/// tries again).
fn psync(shard: &Shard, origin: Origin, psync: Option<(Bytes, i64)>) {
    let replica = &shard.shared.replica;
    // A node on shard links has no single stream to pass on: it goes back to one (see
    // `replica/shard_links.rs`), and the sub-replica is refused until then.
    if replica.is_replica() && replica.on_shard_links() {
        replica.want_single_stream();
    }
    if replica.is_replica() && (!replica.link_up() || replica.on_shard_links()) {
        // PSYNC's reply slot is silent: the refusal is written like `+FULLRESYNC` is.
        let sink = origin.sink;
        spawn_local(async move {
            let refusal = Bytes::from_static(
                b"-NOMASTERLINK Can't SYNC while not connected with my master\r\n",
            );
            let _ = submit_to(origin.shard, move || async move {
                push_here(sink, Some(refusal))
            })
            .await;
        });
        return;
    }
    let conf = LINKS.with(|links| {
        let mut links = links.borrow_mut();
        let conf = links.entry(origin.sink).or_default();
        conf.replica = true;
        conf.clone()
    });
    let _ = shard;
    let (from, sink) = (origin.shard, origin.sink);
    if let Some(i) = conf.shard_link {
        shard_link_psync(i, from, sink, conf, psync);
        return;
    }
    spawn_local(async move {
        // The connection is running its turn now: it is marked once that is over.
        let peer = submit_to(from, move || async move { mark_replica(sink) }).await;
        let Ok(Some(peer_ip)) = peer else { return };
        let ip = conf.ip.clone().unwrap_or(peer_ip);
        let _ = send_to(0, move || {
            let id = accept(from, sink, ip, conf, psync);
            spawn_local(link(id));
        })
        .await;
    });
}

/// The PSYNC of a connection that is master shard `i`'s link: shard `i` takes it (a
/// diskless full sync of its part, or a partial resync from its backlog).
fn shard_link_psync(
    i: usize,
    from: usize,
    sink: SinkKey,
    conf: LinkConf,
    psync: Option<(Bytes, i64)>,
) {
    let Some(psync) = psync.filter(|_| conf.eof) else {
        super::shard_link::refuse(
            from,
            sink,
            "-ERR a shard link synchronizes with PSYNC and capa eof\r\n",
        );
        return;
    };
    spawn_local(async move {
        let peer = submit_to(from, move || async move { mark_replica(sink) }).await;
        let Ok(Some(peer_ip)) = peer else { return };
        let ip = conf.ip.clone().unwrap_or(peer_ip);
        let _ = send_to(i, move || {
            let (id, start) = super::shard_link::accept(from, sink, ip, &conf, psync);
            spawn_local(super::shard_link::run(id, start));
        })
        .await;
    });
}

/// On the connection's shard: it is a replica from now on; its peer's address.
fn mark_replica(sink: SinkKey) -> Option<String> {
    let sink = shard::current().sink(sink)?;
    sink.set_replica();
    let line = sink.client_line(now_ms())?;
    Some(
        line.addr
            .rsplit_once(':')
            .map_or(line.addr.clone(), |(ip, _)| ip.to_owned()),
    )
}

/// A connection of this shard closed: if it was a replica, the hub drops its link.
pub(in crate::server) fn closed(shard: &Shard, sink: SinkKey) {
    let Some(conf) = LINKS
        .with(|links| links.borrow_mut().remove(&sink))
        .filter(|c| c.replica)
    else {
        return;
    };
    let from = shard.id;
    if let Some(i) = conf.shard_link {
        spawn_local(async move {
            let _ = send_to(i, move || super::shard_link::closed(from, sink)).await;
        });
        return;
    }
    spawn_local(async move {
        let _ = send_to(0, move || {
            with_hub(|hub| {
                for replica in &mut hub.replicas {
                    if replica.shard == from && replica.sink == sink {
                        replica.drop_link();
                    }
                }
            })
        })
        .await;
    });
}
