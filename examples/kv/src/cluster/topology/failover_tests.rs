//! Replicas, failure detection and failover, on simulated clusters: every node pings every
//! other once a simulated second and the queued messages are delivered between ticks, as
//! the bus glue does.

use super::*;
use crate::cluster::render;
use crate::reply::Reply;

const TIMEOUT: u64 = 1000;

fn addr(port: u16) -> NodeAddr {
    NodeAddr {
        ip: "127.0.0.1".into(),
        port,
        cport: port + 10000,
    }
}

fn inbound() -> Link {
    Link::Inbound {
        peer_ip: "127.0.0.1".into(),
        local_ip: "127.0.0.1".into(),
    }
}

/// Nodes that talk over a perfect network, except the ones that are down.
struct Net {
    nodes: Vec<Topology>,
    down: Vec<bool>,
    now: u64,
}

impl Net {
    /// `primaries` primaries splitting the slots evenly (config epochs 1..), then
    /// `replicas` replicas of each, in order, all met and gossiped.
    fn new(primaries: usize, replicas: usize) -> Net {
        let count = primaries * (1 + replicas);
        let mut nodes: Vec<Topology> = (0..count)
            .map(|i| {
                let mut t = Topology::new(
                    NodeId::from_random([i as u8 + 1; 20]),
                    addr(7000 + i as u16),
                    TIMEOUT,
                );
                t.seed(i as u64 + 7);
                t
            })
            .collect();
        let per = 16384 / primaries;
        for (i, t) in nodes.iter_mut().take(primaries).enumerate() {
            let start = (i * per) as u16;
            let end = if i + 1 == primaries {
                16383
            } else {
                ((i + 1) * per - 1) as u16
            };
            t.update_slots(&[(start, end)], false).unwrap();
        }
        for (i, t) in nodes.iter_mut().enumerate() {
            t.set_config_epoch(i as i64 + 1).unwrap();
        }
        let mut net = Net {
            nodes,
            down: vec![false; count],
            now: 1_000_000,
        };
        for i in 1..count {
            let first = net.nodes[0].myself().addr.clone();
            net.nodes[i]
                .meet(
                    b"127.0.0.1",
                    i64::from(first.port),
                    i64::from(first.cport),
                    0,
                )
                .unwrap();
            let meet = net.nodes[i].message(MessageKind::Meet);
            let pong = net.nodes[0].receive(&meet, &inbound(), net.now).unwrap();
            net.nodes[i].receive(&pong, &Link::Handshake(first), net.now);
        }
        net.run(3000);
        for r in 0..primaries * replicas {
            let replica = primaries + r;
            let primary = net.id(r / replicas);
            net.nodes[replica].replicate(primary.as_bytes(), 0).unwrap();
        }
        net.run(3000);
        net
    }

    fn id(&self, i: usize) -> NodeId {
        self.nodes[i].myself().id
    }

    fn index_of(&self, id: &NodeId) -> usize {
        self.nodes
            .iter()
            .position(|t| t.myself().id == *id)
            .unwrap()
    }

    /// Node `i`'s view of node `of`.
    fn view(&self, i: usize, of: usize) -> &Node {
        let t = &self.nodes[i];
        t.node(t.find(&self.id(of)).unwrap()).unwrap()
    }

    /// Who owns `slot` in node `i`'s view.
    fn owner(&self, i: usize, slot: u16) -> Option<usize> {
        let t = &self.nodes[i];
        t.owner(slot)
            .and_then(|o| t.node(o))
            .map(|n| self.index_of(&n.id))
    }

    fn ping(&mut self, from: usize, to: usize) {
        let to_id = self.id(to);
        if self.nodes[from].find(&to_id).is_none() {
            return;
        }
        self.nodes[from].ping_sent(&to_id, self.now);
        if self.down[to] {
            self.nodes[from].set_link(&to_id, false);
            return;
        }
        let ping = self.nodes[from].message(MessageKind::Ping);
        let pong = self.nodes[to].receive(&ping, &inbound(), self.now).unwrap();
        self.nodes[from].receive(&pong, &Link::ToNode(to_id), self.now);
        self.nodes[from].set_link(&to_id, true);
    }

    fn deliver(&mut self) {
        for _ in 0..16 {
            let mut any = false;
            for from in 0..self.nodes.len() {
                if self.down[from] {
                    self.nodes[from].take_outbox();
                    continue;
                }
                for Outgoing { to, message } in self.nodes[from].take_outbox() {
                    any = true;
                    let targets: Vec<usize> = match to {
                        Destination::All => (0..self.nodes.len()).filter(|&i| i != from).collect(),
                        Destination::Node(id) => vec![self.index_of(&id)],
                    };
                    for target in targets {
                        if !self.down[target] {
                            let reply = self.nodes[target].receive(&message, &inbound(), self.now);
                            assert_eq!(reply, None, "only PING and MEET are answered");
                        }
                    }
                }
            }
            if !any {
                return;
            }
        }
    }

    /// `ms` of simulated time: a tick every 100 ms, a ping round every 500 ms.
    fn run(&mut self, ms: u64) {
        let end = self.now + ms;
        while self.now < end {
            self.now += 100;
            if self.now.is_multiple_of(500) {
                for from in 0..self.nodes.len() {
                    for to in 0..self.nodes.len() {
                        if from != to && !self.down[from] {
                            self.ping(from, to);
                        }
                    }
                }
            }
            for i in 0..self.nodes.len() {
                if !self.down[i] {
                    let now = self.now;
                    self.nodes[i].cron(now);
                }
            }
            self.deliver();
        }
    }

    /// Runs until `done` holds, at most `ms`; returns the time it took.
    fn run_until(&mut self, ms: u64, mut done: impl FnMut(&Net) -> bool) -> u64 {
        let start = self.now;
        while !done(self) {
            assert!(self.now - start < ms, "not done within {ms} ms");
            self.run(100);
        }
        self.now - start
    }
}

fn nodes_text(t: &Topology) -> String {
    match render::nodes(t) {
        Reply::Bulk(text) => String::from_utf8(text.to_vec()).unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn replicate_checks_like_redis() {
    let mut net = Net::new(2, 0);
    let (a, b) = (net.id(0), net.id(1));
    let err = |r: Result<(), ClusterError>| r.unwrap_err().0;
    assert_eq!(
        err(net.nodes[0].replicate(b"nope", 0)),
        "ERR Unknown node nope"
    );
    assert_eq!(
        err(net.nodes[0].replicate(a.as_bytes(), 0)),
        "ERR Can't replicate myself"
    );
    assert_eq!(
        err(net.nodes[0].replicate(b.as_bytes(), 0)),
        "ERR To set a master the node must be empty and without assigned slots."
    );
    let mut c = Topology::new(NodeId::from_random([9; 20]), addr(7009), TIMEOUT);
    let first = addr(7000);
    c.meet(b"127.0.0.1", 7000, 17000, 0).unwrap();
    let meet = c.message(MessageKind::Meet);
    let pong = net.nodes[0].receive(&meet, &inbound(), net.now).unwrap();
    c.receive(&pong, &Link::Handshake(first), net.now);
    assert_eq!(
        err(c.replicate(a.as_bytes(), 3)),
        "ERR To set a master the node must be empty and without assigned slots."
    );
    c.replicate(a.as_bytes(), 0).unwrap();
    net.nodes.push(c);
    net.down.push(false);
    net.run(2000);
    let c_id = net.id(2);
    assert_eq!(
        err(net.nodes[1].replicate(c_id.as_bytes(), 0)),
        "ERR I can only replicate a master, not a replica."
    );
    // A replica may switch primaries.
    net.nodes[2].replicate(b.as_bytes(), 0).unwrap();
    assert_eq!(net.nodes[2].my_primary(), net.nodes[2].find(&b));
}

#[test]
fn replicas_show_in_nodes_slots_and_shards() {
    let mut net = Net::new(3, 1);
    for i in 0..6 {
        let t = &net.nodes[i];
        let text = nodes_text(t);
        assert_eq!(text.lines().count(), 6, "{text}");
        for r in 3..6 {
            let line = text
                .lines()
                .find(|l| l.starts_with(net.id(r).as_str()))
                .unwrap();
            let fields: Vec<&str> = line.split(' ').collect();
            assert!(fields[2].ends_with("slave"), "{line}");
            assert_eq!(fields[3], net.id(r - 3).as_str(), "{line}");
            // A replica shows its primary's config epoch.
            assert_eq!(fields[6], (r - 2).to_string(), "{line}");
            assert_eq!(fields.len(), 8, "replicas list no slots: {line}");
        }
        assert!(t.is_ok());
        assert_eq!(t.size(), 3);
    }
    // CLUSTER SLOTS lists a replica once it announced data.
    for t in &mut net.nodes[3..] {
        t.set_my_offset(100);
    }
    net.run(1000);
    let Reply::Array(ranges) = render::slots(&net.nodes[0]) else {
        panic!()
    };
    assert_eq!(ranges.len(), 3);
    for range in &ranges {
        let Reply::Array(fields) = range else {
            panic!()
        };
        assert_eq!(fields.len(), 4, "start, end, primary, replica: {fields:?}");
    }
    let Reply::Array(shards) = render::shards(&net.nodes[4]) else {
        panic!()
    };
    assert_eq!(shards.len(), 3);
    let Reply::Array(shard) = &shards[0] else {
        panic!()
    };
    let Reply::Array(members) = &shard[3] else {
        panic!()
    };
    assert_eq!(members.len(), 2);
    let Reply::Array(replica) = &members[1] else {
        panic!()
    };
    assert_eq!(replica[9], Reply::Bulk(bytes::Bytes::from("replica")));
    assert_eq!(replica[11], Reply::Integer(100));
    assert_eq!(replica[13], Reply::Bulk(bytes::Bytes::from("online")));
    // CLUSTER REPLICAS.
    let Reply::Array(lines) =
        render::replicas(&net.nodes[1], net.nodes[1].find(&net.id(2)).unwrap())
    else {
        panic!()
    };
    assert_eq!(lines.len(), 1);
    // Saved and read back.
    use crate::cluster::nodes_conf;
    let text = nodes_conf::render(&net.nodes[3]);
    let back = nodes_conf::parse(&text, TIMEOUT).unwrap();
    assert!(back.myself().is_replica());
    assert_eq!(back.my_primary(), back.find(&net.id(0)));
    let again = nodes_conf::parse(&nodes_conf::render(&back), TIMEOUT).unwrap();
    assert_eq!(nodes_conf::render(&again), nodes_conf::render(&back));
}

#[test]
fn a_failed_primary_is_replaced_by_its_replica() {
    let mut net = Net::new(3, 1);
    net.nodes[5].set_my_offset(500);
    net.down[2] = true;
    let took = net.run_until(4 * TIMEOUT, |net| {
        [0, 1, 3, 4, 5].iter().all(|&i| net.view(i, 2).fail)
    });
    assert!(took > TIMEOUT, "not before the node timeout: {took} ms");
    assert!(!net.nodes[0].is_ok(), "slots without a working primary");
    assert!(
        net.nodes[0].count_failure_reports(net.nodes[0].find(&net.id(2)).unwrap(), net.now) >= 1
    );
    let took = net.run_until(2 * TIMEOUT + 2000, |net| {
        [0, 1, 3, 4, 5]
            .iter()
            .all(|&i| net.owner(i, 16383) == Some(5))
    });
    assert!(took >= 500, "the election waits at least 500 ms: {took}");
    for i in [0, 1, 3, 4, 5] {
        assert!(net.nodes[i].is_ok(), "node {i}");
        assert!(!net.view(i, 5).is_replica());
        assert!(net.owner(i, 0) == Some(0) && net.owner(i, 6000) == Some(1));
    }
    let winner = net.nodes[5].myself().config_epoch;
    assert!(winner > 6, "elected under a new epoch: {winner}");
    assert_eq!(net.nodes[5].slot_map().primary(), NO_NODE);
    // The old primary comes back with its old configuration: it follows the new owner.
    net.down[2] = false;
    net.run_until(3000, |net| {
        net.nodes[2].my_primary() == net.nodes[2].find(&net.id(5))
    });
    net.run(2000);
    for i in 0..6 {
        assert!(!net.view(i, 2).fail, "node {i} cleared FAIL");
        assert_eq!(net.owner(i, 16383), Some(5));
        assert!(net.view(i, 2).is_replica() || i == 2);
    }
    assert_eq!(net.nodes[2].num_slots(net.nodes[2].myself_index()), 0);
}

#[test]
fn the_best_replica_wins_and_the_other_follows() {
    let mut net = Net::new(3, 2);
    // Replicas of node 0 are 3 and 4; 4 has more data.
    net.nodes[3].set_my_offset(100);
    net.nodes[4].set_my_offset(200);
    net.run(1000);
    net.down[0] = true;
    net.run_until(10_000, |net| net.owner(1, 0).is_some_and(|o| o != 0));
    assert_eq!(net.owner(1, 0), Some(4), "rank 0 goes first");
    net.run(3000);
    assert_eq!(net.nodes[3].my_primary(), net.nodes[3].find(&net.id(4)));
    for i in 1..9 {
        assert_eq!(net.owner(i, 0), Some(4), "node {i}");
    }
}

#[test]
fn primaries_vote_once_per_epoch_and_only_for_failed_primaries() {
    let mut net = Net::new(3, 1);
    let replica = net.id(3);
    // A vote request while the primary is fine is refused.
    net.nodes[3].current_epoch += 1;
    let request = net.nodes[3].message(MessageKind::AuthRequest);
    net.nodes[1].receive(&request, &inbound(), net.now);
    assert!(net.nodes[1].take_outbox().is_empty());
    // With the forced flag (a manual failover) it is granted, once per epoch.
    let mut forced = request.clone();
    forced.flags |= crate::cluster::gossip::FLAG_FORCE_ACK;
    net.nodes[1].receive(&forced, &inbound(), net.now);
    let out = net.nodes[1].take_outbox();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, Destination::Node(replica));
    assert_eq!(out[0].message.kind, MessageKind::AuthAck);
    assert_eq!(net.nodes[1].last_vote_epoch(), net.nodes[1].current_epoch());
    net.nodes[1].receive(&forced, &inbound(), net.now);
    assert!(net.nodes[1].take_outbox().is_empty(), "already voted");
    // Replicas do not vote.
    net.nodes[4].receive(&forced, &inbound(), net.now);
    assert!(net.nodes[4].take_outbox().is_empty());
}

#[test]
fn a_planned_failover_waits_for_the_primarys_offset() {
    let mut net = Net::new(3, 1);
    net.nodes[0].set_my_offset(1000);
    net.nodes[3].set_my_offset(900);
    let err = |r: Result<(), ClusterError>| r.unwrap_err().0;
    assert_eq!(
        err(net.nodes[0].failover(FailoverMode::Coordinated, net.now)),
        "ERR You should send CLUSTER FAILOVER to a replica"
    );
    net.nodes[3]
        .failover(FailoverMode::Coordinated, net.now)
        .unwrap();
    net.deliver();
    let effects = net.nodes[0].take_effects();
    assert!(
        matches!(effects[..], [Effect::PauseWrites { .. }]),
        "{effects:?}"
    );
    // The glue paused writes; the last ones made the offset 1010.
    net.nodes[0].writes_paused(1010);
    net.run(1000);
    assert_eq!(net.nodes[3].manual_failover().primary_offset, Some(1010));
    assert!(
        net.view(1, 3).is_replica(),
        "not before the replica caught up"
    );
    net.nodes[3].set_my_offset(1010);
    net.run_until(2000, |net| (0..6).all(|i| net.owner(i, 0) == Some(3)));
    net.run(1000);
    assert_eq!(net.nodes[0].my_primary(), net.nodes[0].find(&net.id(3)));
    assert_eq!(net.nodes[0].take_effects(), vec![Effect::UnpauseWrites]);
    assert!((0..6).all(|i| net.nodes[i].is_ok()));
}

#[test]
fn a_planned_failover_gives_up_after_its_timeout() {
    let mut net = Net::new(3, 1);
    net.nodes[0].set_my_offset(1000);
    net.nodes[3]
        .failover(FailoverMode::Coordinated, net.now)
        .unwrap();
    net.deliver();
    net.nodes[0].writes_paused(1000);
    net.run(MF_TIMEOUT_MS + 1000);
    assert_eq!(net.owner(1, 0), Some(0));
    assert_eq!(
        net.nodes[0].take_effects(),
        vec![
            Effect::PauseWrites {
                until_ms: 1_006_000 + 2 * MF_TIMEOUT_MS
            },
            Effect::UnpauseWrites
        ]
    );
    assert_eq!(net.nodes[3].manual_failover().end, 0);
}

#[test]
fn force_and_takeover() {
    let mut net = Net::new(3, 1);
    net.down[0] = true;
    net.run(600);
    assert_eq!(
        net.nodes[3]
            .failover(FailoverMode::Coordinated, net.now)
            .unwrap_err()
            .0,
        "ERR Master is down or failed, please use CLUSTER FAILOVER FORCE"
    );
    net.nodes[3].failover(FailoverMode::Force, net.now).unwrap();
    net.run_until(2000, |net| (1..6).all(|i| net.owner(i, 0) == Some(3)));
    // TAKEOVER needs no vote at all: even with every other primary down.
    net.down[1] = true;
    net.down[2] = true;
    net.nodes[4]
        .failover(FailoverMode::Takeover, net.now)
        .unwrap();
    assert_eq!(net.owner(4, 6000), Some(4));
    assert!(net.nodes[4].config_epoch_is_highest());
}

#[test]
fn coverage_can_be_optional() {
    let mut net = Net::new(3, 0);
    for t in &mut net.nodes {
        t.set_options(false, false);
    }
    net.down[2] = true;
    net.run_until(5000, |net| net.view(0, 2).fail);
    assert!(net.nodes[0].is_ok(), "two of three primaries reachable");
    let mut strict = Net::new(3, 0);
    strict.down[2] = true;
    strict.run_until(5000, |net| net.view(0, 2).fail);
    assert!(!strict.nodes[0].is_ok());
    // A node that can reach no other primary is down either way (a minority).
    net.down[1] = true;
    net.run(3 * TIMEOUT);
    assert!(!net.nodes[0].is_ok());
}

#[test]
fn fail_needs_a_majority_of_primaries() {
    let mut net = Net::new(3, 1);
    // Only replica 5 cannot reach primary 2: replicas do not count.
    let id2 = net.id(2);
    net.nodes[5].ping_sent(&id2, net.now);
    net.nodes[5].cron(net.now + TIMEOUT + 1);
    assert!(net.view(5, 2).pfail);
    let msg = net.nodes[5].message(MessageKind::Ping);
    net.nodes[0].receive(&msg, &inbound(), net.now);
    assert_eq!(
        net.nodes[0].count_failure_reports(net.nodes[0].find(&id2).unwrap(), net.now),
        0
    );
    assert!(!net.view(0, 2).fail);
}
