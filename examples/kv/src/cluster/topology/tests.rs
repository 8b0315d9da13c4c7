use super::*;

fn addr(port: u16) -> NodeAddr {
    NodeAddr {
        ip: "127.0.0.1".into(),
        port,
        cport: port + 10000,
    }
}

fn node(n: u8) -> Topology {
    Topology::new(
        NodeId::from_random([n; 20]),
        addr(7000 + u16::from(n)),
        15000,
    )
}

fn err(result: Result<(), ClusterError>) -> String {
    result.unwrap_err().0
}

/// `a` meets `b` over the bus: MEET from `a` on `b`'s inbound side, PONG back on `a`'s
/// handshake link.
fn meet(a: &mut Topology, b: &mut Topology, now: u64) {
    let mut b_addr = b.myself().addr.clone();
    if b_addr.ip.is_empty() {
        b_addr.ip = "127.0.0.1".into();
    }
    a.meet(
        b_addr.ip.as_bytes(),
        i64::from(b_addr.port),
        i64::from(b_addr.cport),
        now,
    )
    .unwrap();
    let meet = a.message(MessageKind::Meet);
    let inbound = Link::Inbound {
        peer_ip: "127.0.0.1".into(),
        local_ip: "127.0.0.1".into(),
    };
    let pong = b.receive(&meet, &inbound, now).unwrap();
    assert_eq!(pong.kind, MessageKind::Pong);
    assert_eq!(a.receive(&pong, &Link::Handshake(b_addr), now), None);
}

/// `from` pings `to`, which answers.
fn ping(from: &mut Topology, to: &mut Topology, now: u64) {
    let ping = from.message(MessageKind::Ping);
    let inbound = Link::Inbound {
        peer_ip: "127.0.0.1".into(),
        local_ip: "127.0.0.1".into(),
    };
    let pong = to.receive(&ping, &inbound, now).unwrap();
    from.receive(&pong, &Link::ToNode(to.myself().id), now);
}

#[test]
fn slot_assignment_errors_match_redis() {
    let mut t = node(1);
    t.update_slots(&[(0, 10)], false).unwrap();
    assert_eq!(
        err(t.update_slots(&[(5, 5)], false)),
        "ERR Slot 5 is already busy"
    );
    assert_eq!(
        err(t.update_slots(&[(20, 20), (20, 20)], false)),
        "ERR Slot 20 specified multiple times"
    );
    assert_eq!(
        err(t.update_slots(&[(30, 29)], false)),
        "ERR start slot number 30 is greater than end slot number 29"
    );
    assert_eq!(
        err(t.update_slots(&[(11, 11)], true)),
        "ERR Slot 11 is already unassigned"
    );
    // A refused command changes nothing.
    assert_eq!(t.owner(20), None);
    t.update_slots(&[(0, 10)], true).unwrap();
    assert_eq!(t.owner(0), None);
    assert!(!t.is_ok());
    t.update_slots(&[(0, 16383)], false).unwrap();
    assert!(t.is_ok());
}

#[test]
fn meet_and_gossip_join_three_nodes() {
    let (mut a, mut b, mut c) = (node(1), node(2), node(3));
    a.update_slots(&[(0, 5460)], false).unwrap();
    b.update_slots(&[(5461, 10922)], false).unwrap();
    c.update_slots(&[(10923, 16383)], false).unwrap();
    for (t, epoch) in [(&mut a, 1), (&mut b, 2), (&mut c, 3)] {
        t.set_config_epoch(epoch).unwrap();
    }
    // redis-cli --cluster create: every node meets the first.
    meet(&mut b, &mut a, 1);
    meet(&mut c, &mut a, 1);
    assert_eq!(a.nodes().count(), 3);
    assert_eq!(b.nodes().count(), 2, "b has not heard of c yet");
    // Gossip does the rest.
    ping(&mut b, &mut a, 2);
    ping(&mut c, &mut a, 2);
    ping(&mut a, &mut b, 2);
    ping(&mut a, &mut c, 2);
    ping(&mut b, &mut c, 3);
    ping(&mut c, &mut b, 3);
    for t in [&a, &b, &c] {
        assert_eq!(t.nodes().count(), 3);
        assert!(
            t.is_ok(),
            "{}",
            crate::cluster::render::node_line(t, 0, t.myself())
        );
        assert_eq!(t.current_epoch(), 3);
    }
    let map = b.slot_map();
    use crate::cluster::view::SlotState;
    assert_eq!(map.state(6000), SlotState::Mine);
    let SlotState::Elsewhere(owner) = map.state(0) else {
        panic!("slot 0 is a's");
    };
    assert_eq!(map.endpoint(owner), "127.0.0.1:7001");
}

#[test]
fn a_finished_import_wins_the_slot_everywhere() {
    let (mut a, mut b, mut c) = (node(1), node(2), node(3));
    a.update_slots(&[(0, 8191)], false).unwrap();
    b.update_slots(&[(8192, 16383)], false).unwrap();
    a.set_config_epoch(1).unwrap();
    b.set_config_epoch(2).unwrap();
    meet(&mut a, &mut b, 1);
    meet(&mut c, &mut a, 1);
    ping(&mut a, &mut b, 1);
    ping(&mut b, &mut a, 1);
    ping(&mut a, &mut c, 1);
    ping(&mut c, &mut a, 1);
    let (a_id, b_id) = (a.myself().id, b.myself().id);
    let b_index = a.find(&b_id).unwrap();
    // reshard slot 100 from a to b, as redis-cli does it.
    b.set_importing(100, a_id.as_bytes()).unwrap();
    a.set_migrating(100, b_id.as_bytes()).unwrap();
    assert_eq!(
        err(a.set_importing(5, b_id.as_bytes())),
        "ERR I'm already the owner of hash slot 5"
    );
    let me = b.myself_index();
    b.set_owner(100, me, 0).unwrap();
    assert!(
        b.config_epoch_is_highest(),
        "the importing node bumped its epoch"
    );
    assert!(a.gives_away(100, b_index));
    assert!(err(a.set_owner(100, b_index, 3)).contains("still hold keys"));
    a.set_owner(100, b_index, 0).unwrap();
    assert_eq!(a.migrating().count(), 0);
    // c hears only from b: the newer epoch takes the slot.
    ping(&mut b, &mut c, 2);
    let c_b = c.find(&b_id).unwrap();
    assert_eq!(c.owner(100), Some(c_b));
    assert_ne!(c.owner(99), Some(c_b));
    // and a's stale claim does not take it back.
    ping(&mut a, &mut c, 3);
    assert_eq!(c.owner(100), Some(c_b));
}

#[test]
fn equal_epochs_are_resolved_by_id() {
    let (mut a, mut b) = (node(1), node(2));
    meet(&mut a, &mut b, 1);
    ping(&mut b, &mut a, 1);
    ping(&mut a, &mut b, 1);
    // Both started at 0: the smaller id moved on.
    assert_ne!(a.myself().config_epoch, b.myself().config_epoch);
}

#[test]
fn setslot_and_epoch_errors() {
    let mut a = node(1);
    a.update_slots(&[(0, 0)], false).unwrap();
    let unknown = "ab".repeat(20);
    assert_eq!(
        err(a.set_migrating(1, unknown.as_bytes())),
        "ERR I'm not the owner of hash slot 1"
    );
    assert_eq!(
        err(a.set_migrating(0, unknown.as_bytes())),
        format!("ERR I don't know about node {unknown}")
    );
    assert_eq!(
        err(a.check_set_owner(b"nope").map(|_| ())),
        "ERR Unknown node nope"
    );
    assert_eq!(
        err(a.set_config_epoch(-1)),
        "ERR Invalid config epoch specified: -1"
    );
    a.set_config_epoch(5).unwrap();
    assert_eq!(
        err(a.set_config_epoch(6)),
        "ERR Node config epoch is already non-zero"
    );
    assert_eq!(a.bump_epoch(), (false, 5));
    let mut b = node(2);
    meet(&mut b, &mut a, 1);
    assert!(err(a.set_config_epoch(1)).contains("does not know any other node"));
    assert!(err(a.meet(b"not-an-ip", 1, 2, 0)).starts_with("ERR Invalid node address specified"));
}

#[test]
fn forget_bans_the_node_from_gossip() {
    let (mut a, mut b, mut c) = (node(1), node(2), node(3));
    meet(&mut a, &mut b, 1);
    meet(&mut c, &mut b, 1);
    ping(&mut a, &mut b, 1);
    let c_id = c.myself().id;
    assert!(a.find(&c_id).is_some());
    a.forget(c_id.as_bytes(), 10).unwrap();
    assert!(a.find(&c_id).is_none());
    ping(&mut a, &mut b, 20);
    assert!(a.find(&c_id).is_none(), "banned for a minute");
    a.cron(10 + FORGET_BAN_MS + 1);
    ping(&mut a, &mut b, 10 + FORGET_BAN_MS + 2);
    assert!(a.find(&c_id).is_some());
    let a_id = a.myself().id;
    assert_eq!(
        err(a.forget(a_id.as_bytes(), 0)),
        "ERR I tried hard but I can't forget myself..."
    );
}

#[test]
fn silent_nodes_turn_pfail() {
    let (mut a, mut b) = (node(1), node(2));
    meet(&mut a, &mut b, 1);
    let b_id = b.myself().id;
    a.ping_sent(&b_id, 100);
    a.cron(100 + 15000);
    let b_index = a.find(&b_id).unwrap();
    assert!(!a.node(b_index).unwrap().pfail);
    a.cron(100 + 15001);
    assert!(a.node(b_index).unwrap().pfail);
    ping(&mut a, &mut b, 20000);
    assert!(!a.node(b_index).unwrap().pfail);
}

#[test]
fn meeting_oneself_ends_the_handshake_and_adds_nobody() {
    let mut a = node(1);
    a.meet(b"127.0.0.1", 7001, 17001, 0).unwrap();
    let meet = a.message(MessageKind::Meet);
    let inbound = Link::Inbound {
        peer_ip: "127.0.0.1".into(),
        local_ip: "127.0.0.1".into(),
    };
    let pong = a.receive(&meet, &inbound, 0).unwrap();
    a.receive(&pong, &Link::Handshake(addr(7001)), 0);
    assert!(a.handshakes().is_empty());
    assert_eq!(a.nodes().count(), 1);
}

#[test]
fn a_node_learns_its_address_when_met() {
    let mut a = Topology::new(
        NodeId::from_random([1; 20]),
        NodeAddr {
            ip: String::new(),
            port: 7001,
            cport: 17001,
        },
        15000,
    );
    let mut b = node(2);
    meet(&mut b, &mut a, 1);
    assert_eq!(a.myself().addr.ip, "127.0.0.1");
}
