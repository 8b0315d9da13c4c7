//! The cluster bus, on shard 0: a listener on the bus port, one outgoing link per known node
//! (PING, wait for PONG, once a second and at once after a configuration change), and a
//! handshake link per CLUSTER MEET in progress. Messages are [`Message`]s; what they change
//! is decided by [`Topology::receive`], then committed like any change.
//!
//! With `tls-cluster yes` every link runs over TLS: the server's certificate (and, as the
//! TLS port, `tls-auth-clients`) for incoming links, `tls-client-cert-file` (or the server's)
//! for outgoing ones, peers checked against the CA.
//!
//! Messages other than PING/PONG that the topology queues (FAIL, vote requests and votes,
//! manual failover requests, a new primary's PONG) go out on our link to their destination
//! as soon as they are queued, between pings or while a PONG is awaited; the peer answers
//! none of them on that connection, so each PING still gets exactly one PONG.
//!
//! Bounded: a link handles one message at a time (a peer that stops reading stops being
//! read), messages are capped by the parser's limits, incoming links are capped at
//! [`MAX_INBOUND`] and closed when idle, at most [`MAX_QUEUED`] messages wait per link.
//!
//! [`Topology::receive`]: crate::cluster::Topology::receive

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::{poll_fn, Future};
use std::net::{IpAddr, SocketAddr};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use corewire::runtime::net::{TcpListener, TcpStream};
use corewire::runtime::{sleep, spawn_local, timeout};

use super::super::shard::now_ms;
use super::node::ClusterNode;
use super::peer::{cluster_tls, PeerStream as BusStream};
use super::replication;
use crate::cluster::gossip::{self, Message, MessageKind};
use crate::cluster::node::{NodeAddr, NodeId};
use crate::cluster::topology::{Destination, Link, Outgoing};
use crate::resp::RequestParser;

/// How often the supervisor looks for links to start and runs the topology's timers.
const TICK: Duration = Duration::from_millis(100);
/// Longest pause between two pings to one node.
const PING_EVERY: Duration = Duration::from_secs(1);
/// Incoming bus connections at most (the bus port is open to anyone who can reach it).
const MAX_INBOUND: usize = 1024;
/// Messages waiting for one link at most; the oldest is dropped first (the topology
/// repeats what matters: FAIL from the next node to notice, votes in the next election).
const MAX_QUEUED: usize = 64;

/// Which link tasks run, so each node and each handshake has exactly one, and what waits
/// to be sent on each.
#[derive(Default)]
pub(crate) struct Links {
    to_nodes: HashSet<NodeId>,
    handshakes: HashSet<NodeAddr>,
    inbound: usize,
    queued: HashMap<NodeId, VecDeque<Message>>,
}

/// Queues the topology's messages on the links to their destinations and wakes the links.
pub(super) fn queue(node: &ClusterNode, outgoing: Vec<Outgoing>) {
    let everyone: Vec<NodeId> = {
        let topology = node.topology();
        let me = topology.myself_index();
        topology
            .nodes()
            .filter(|(i, n)| *i != me && !n.addr.ip.is_empty())
            .map(|(_, n)| n.id)
            .collect()
    };
    let mut links = node.links.borrow_mut();
    for Outgoing { to, message } in outgoing {
        let targets = match to {
            Destination::All => everyone.clone(),
            Destination::Node(id) => vec![id],
        };
        for id in targets {
            let queue = links.queued.entry(id).or_default();
            if queue.len() == MAX_QUEUED {
                queue.pop_front();
            }
            queue.push_back(message.clone());
        }
    }
    node.announce.notify_waiters();
}

fn node_timeout(node: &ClusterNode) -> Duration {
    Duration::from_millis(node.topology().node_timeout_ms().max(100))
}

/// Reads whole bus messages from one connection.
struct Reader {
    buf: BytesMut,
    parser: RequestParser,
}

impl Reader {
    fn new() -> Reader {
        Reader {
            buf: BytesMut::new(),
            parser: RequestParser::new(gossip::parser_limits()),
        }
    }

    /// The next message; `Err` when the peer closed, failed, or sent something else. Not
    /// cancel-safe: a reader whose call was dropped must not be used again.
    async fn next(&mut self, stream: &BusStream) -> Result<Message, String> {
        loop {
            match self.parser.parse(&mut self.buf) {
                Ok(Some(fields)) => return Message::decode(&fields),
                Ok(None) => {}
                Err(error) => return Err(error.to_string()),
            }
            match stream.read_into(&mut self.buf).await {
                Ok(0) => return Err("closed by the peer".into()),
                Ok(_) => {}
                Err(error) => return Err(error.to_string()),
            }
        }
    }
}

async fn send(stream: &BusStream, message: &Message) -> Result<(), String> {
    let mut out = BytesMut::new();
    message.encode(&mut out);
    stream
        .send_all(out.freeze())
        .await
        .map_err(|e| e.to_string())
}

fn bus_addr(addr: &NodeAddr) -> Option<SocketAddr> {
    let ip: IpAddr = addr.ip.parse().ok()?;
    Some(SocketAddr::new(ip, addr.cport))
}

async fn connect(addr: &NodeAddr, limit: Duration) -> Result<BusStream, String> {
    let target = bus_addr(addr).ok_or_else(|| format!("no bus address for {addr:?}"))?;
    match timeout(limit, BusStream::connect(target)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("connect timed out".into()),
    }
}

/// Accepts incoming bus connections.
pub(super) async fn listen(node: Rc<ClusterNode>, listener: TcpListener) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "cluster bus accept failed");
                sleep(TICK).await;
                continue;
            }
        };
        if node.links.borrow().inbound >= MAX_INBOUND {
            tracing::warn!(?peer, "too many cluster bus connections; refusing one");
            continue;
        }
        spawn_local(inbound(node.clone(), stream, peer));
    }
}

/// Counts an incoming link for as long as it lives.
struct InboundSlot(Rc<ClusterNode>);

impl Drop for InboundSlot {
    fn drop(&mut self) {
        self.0.links.borrow_mut().inbound -= 1;
    }
}

/// A connection a peer opened: PING or MEET in, PONG out.
async fn inbound(node: Rc<ClusterNode>, tcp: TcpStream, peer: Option<SocketAddr>) {
    node.links.borrow_mut().inbound += 1;
    let _slot = InboundSlot(node.clone());
    let stream = match cluster_tls() {
        None => BusStream::Tcp(tcp),
        Some(tls) => match timeout(node_timeout(&node), tls.acceptor.accept(tcp)).await {
            Ok(Ok(stream)) => BusStream::Tls(stream),
            Ok(Err(error)) => {
                corewire::runtime::report_protocol_error("cluster-bus-tls", peer, &error);
                return;
            }
            Err(_) => {
                corewire::runtime::report_protocol_error(
                    "cluster-bus-tls",
                    peer,
                    &"handshake timed out",
                );
                return;
            }
        },
    };
    let ip = |addr: Option<SocketAddr>| addr.map_or(String::new(), |a| a.ip().to_string());
    let link = Link::Inbound {
        peer_ip: ip(peer),
        local_ip: ip(stream.local_addr().ok()),
    };
    let idle = node_timeout(&node) * 2;
    let mut reader = Reader::new();
    loop {
        let message = match timeout(idle, reader.next(&stream)).await {
            Ok(Ok(message)) => message,
            Ok(Err(why)) => {
                tracing::debug!(?peer, %why, "cluster bus connection closed");
                return;
            }
            Err(_) => return,
        };
        let reply = {
            let mut topology = node.topology_mut();
            topology.set_my_offset(replication::offset());
            topology.receive(&message, &link, now_ms())
        };
        if let Some(reply) = reply {
            if send(&stream, &reply).await.is_err() {
                return;
            }
        }
        node.commit().await;
    }
}

/// Runs the topology's timers and starts the links that should run.
pub(super) async fn supervise(node: Rc<ClusterNode>) {
    loop {
        // A MEET wakes this at once; otherwise every tick.
        let _ = timeout(TICK, node.announce.notified()).await;
        {
            let mut topology = node.topology_mut();
            topology.set_my_offset(replication::offset());
            topology.cron(now_ms());
        }
        node.commit().await;
        let (nodes, handshakes): (Vec<NodeId>, Vec<NodeAddr>) = {
            let topology = node.topology();
            let me = topology.myself_index();
            (
                topology
                    .nodes()
                    .filter(|(i, _)| *i != me)
                    .map(|(_, n)| n.id)
                    .collect(),
                topology
                    .handshakes()
                    .iter()
                    .map(|h| h.addr.clone())
                    .collect(),
            )
        };
        let mut links = node.links.borrow_mut();
        for id in nodes {
            if links.to_nodes.insert(id) {
                spawn_local(link_to(node.clone(), id));
            }
        }
        for addr in handshakes {
            if links.handshakes.insert(addr.clone()) {
                spawn_local(handshake(node.clone(), addr));
            }
        }
    }
}

/// Our link to a known node, until the node is forgotten: connect (retrying with backoff),
/// then ping.
async fn link_to(node: Rc<ClusterNode>, id: NodeId) {
    let mut backoff = TICK;
    loop {
        let addr = {
            let topology = node.topology();
            match topology.find(&id).and_then(|i| topology.node(i)) {
                Some(n) => n.addr.clone(),
                None => break,
            }
        };
        // An attempt counts as an unanswered ping: a node we cannot reach turns `fail?`.
        node.topology_mut().ping_sent(&id, now_ms());
        match connect(&addr, node_timeout(&node)).await {
            Ok(stream) => {
                backoff = TICK;
                node.topology_mut().set_link(&id, true);
                if let Err(why) = ping(&node, &id, &stream).await {
                    tracing::debug!(node = %id, %why, "cluster bus link down");
                }
                node.topology_mut().set_link(&id, false);
            }
            Err(why) => {
                tracing::trace!(node = %id, %why, "cluster bus connect failed");
                sleep(backoff).await;
                backoff = (backoff * 2).min(PING_EVERY);
            }
        }
    }
    let mut links = node.links.borrow_mut();
    links.to_nodes.remove(&id);
    links.queued.remove(&id);
}

/// PING, PONG, pause, repeat, with queued messages sent as they are queued (while a PONG is
/// awaited and during the pause too: a FAIL or a vote request held back until a slow peer
/// answers its ping would reach that peer after the election it is for); `Ok` once the
/// node is forgotten.
async fn ping(node: &Rc<ClusterNode>, id: &NodeId, stream: &BusStream) -> Result<(), String> {
    let limit = node_timeout(node);
    let pause = PING_EVERY.min(limit / 2);
    let mut reader = Reader::new();
    loop {
        flush(node, id, stream).await?;
        let message = {
            let mut topology = node.topology_mut();
            if topology.find(id).is_none() {
                return Ok(());
            }
            topology.set_my_offset(replication::offset());
            topology.ping_sent(id, now_ms());
            topology.message(MessageKind::Ping)
        };
        send(stream, &message).await?;
        let pong = {
            let read = pin!(reader.next(stream));
            match read_until(read, Instant::now() + limit, node, id, stream).await? {
                Some(pong) => pong?,
                None => return Err("no pong within the node timeout".into()),
            }
        };
        if pong.sender != *id {
            return Err(format!("the node at that address is now {}", pong.sender));
        }
        node.topology_mut()
            .receive(&pong, &Link::ToNode(*id), now_ms());
        node.commit().await;
        // The link is read between pings too: the peer sends nothing unasked on it, so what
        // arrives is its close (a killed node), seen now rather than at the next ping, and
        // the failure timer starts from the first reconnection attempt. (Dropping the read
        // at the end of the pause drops nothing: nothing is due.)
        let read = pin!(reader.next(stream));
        if let Some(arrived) = read_until(read, Instant::now() + pause, node, id, stream).await? {
            return Err(match arrived {
                Ok(message) => format!("{:?} sent unasked between pings", message.kind),
                Err(why) => why,
            });
        }
    }
}

/// Awaits `read` until `until` while sending what is queued for node `id`; `None` at `until`.
/// Only waits are timed out, never a send: a message cut short would garble the link.
async fn read_until<F: Future>(
    mut read: Pin<&mut F>,
    until: Instant,
    node: &ClusterNode,
    id: &NodeId,
    stream: &BusStream,
) -> Result<Option<F::Output>, String> {
    loop {
        flush(node, id, stream).await?;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        // No await since the queue was found empty: nothing was queued unseen.
        match timeout(left, read_or_queued(read.as_mut(), node)).await {
            Ok(Some(output)) => return Ok(Some(output)),
            Ok(None) => {}
            Err(_) => return Ok(None),
        }
    }
}

/// Sends what is queued for node `id`, until nothing is.
async fn flush(node: &ClusterNode, id: &NodeId, stream: &BusStream) -> Result<(), String> {
    loop {
        let queued: Vec<Message> = node
            .links
            .borrow_mut()
            .queued
            .get_mut(id)
            .map(|q| q.drain(..).collect())
            .unwrap_or_default();
        if queued.is_empty() {
            return Ok(());
        }
        for message in &queued {
            send(stream, message).await?;
        }
    }
}

/// `read`'s outcome, or `None` when something was queued (or the topology changed) first;
/// `read` is left as it was, to be awaited again.
async fn read_or_queued<F: Future>(mut read: Pin<&mut F>, node: &ClusterNode) -> Option<F::Output> {
    let mut queued = pin!(node.announce.notified());
    poll_fn(|cx| {
        if let Poll::Ready(output) = read.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        queued.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// CLUSTER MEET: MEET until the address answers or the handshake expires.
async fn handshake(node: Rc<ClusterNode>, addr: NodeAddr) {
    loop {
        let pending = node.topology().handshakes().iter().any(|h| h.addr == addr);
        if !pending {
            break;
        }
        match meet(&node, &addr).await {
            Ok(()) => break,
            Err(why) => {
                tracing::debug!(ip = %addr.ip, port = addr.port, %why, "cluster meet failed");
                sleep(TICK * 5).await;
            }
        }
    }
    node.links.borrow_mut().handshakes.remove(&addr);
}

async fn meet(node: &Rc<ClusterNode>, addr: &NodeAddr) -> Result<(), String> {
    let limit = node_timeout(node);
    let stream = connect(addr, limit).await?;
    let message = node.topology_mut().message(MessageKind::Meet);
    send(&stream, &message).await?;
    let mut reader = Reader::new();
    let pong = match timeout(limit, reader.next(&stream)).await {
        Ok(pong) => pong?,
        Err(_) => return Err("no answer to MEET".into()),
    };
    if pong.kind != MessageKind::Pong {
        return Err("answered MEET with something else than PONG".into());
    }
    node.topology_mut()
        .receive(&pong, &Link::Handshake(addr.clone()), now_ms());
    node.commit().await;
    Ok(())
}
