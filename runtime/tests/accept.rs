//! Sharded accept: where connections land under each mode and placement, what the counters
//! say about it, and stopping a server while its connections carry on.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corewire_runtime::accept::{AcceptMode, Placement, PlacementInput};
use corewire_runtime::{Budget, ShardStatsSnapshot};

use common::client::{pattern, FramedClient};
use common::echo;
use common::process::wait_until;

const MIB: usize = 1 << 20;

/// A connection whose handler is known to be running: it has answered one echo.
fn live_client(addr: SocketAddr, seed: u64) -> FramedClient {
    let mut c = FramedClient::connect(addr).expect("connect");
    c.echo(&pattern(seed, 32)).expect("first echo");
    c
}

fn sum(stats: &[ShardStatsSnapshot], f: impl Fn(&ShardStatsSnapshot) -> u64) -> u64 {
    stats.iter().map(f).sum()
}

fn handoff(placement: Placement) -> AcceptMode {
    AcceptMode::handoff(placement)
}

#[test]
fn reuse_port_spreads_connections_over_both_shards() {
    const CONNS: u64 = 200;
    let rt = common::runtime(2);
    let server = echo::start(&rt, AcceptMode::ReusePort, Budget::default(), MIB);
    for i in 0..CONNS {
        // Short-lived: each connection's 4-tuple hashes independently.
        live_client(server.addr(), i);
    }
    let stats = rt.stats();
    // The kernel's hash need not be even, but 200 draws never all fall on one side.
    assert!(
        stats[0].accepted > 0 && stats[1].accepted > 0,
        "accepted per shard: {} / {}",
        stats[0].accepted,
        stats[1].accepted
    );
    assert_eq!(sum(&stats, |s| s.accepted), CONNS);
    // Each shard serves what it accepted: nothing is handed over.
    assert_eq!(sum(&stats, |s| s.handoffs_out), 0);
    let placed = server.handle.placed_connections();
    assert_eq!(placed, vec![stats[0].accepted, stats[1].accepted]);
}

#[test]
fn least_connections_balances_long_lived_connections_exactly() {
    let rt = common::runtime(2);
    let server = echo::start(
        &rt,
        handoff(Placement::LeastConnections),
        Budget::default(),
        MIB,
    );
    let clients: Vec<FramedClient> = (0..40).map(|i| live_client(server.addr(), i)).collect();
    assert_eq!(server.handle.open_connections(), vec![20, 20]);
    assert_eq!(server.handle.placed_connections(), vec![20, 20]);
    let stats = rt.stats();
    assert_eq!(
        (stats[0].open_connections, stats[1].open_connections),
        (20, 20)
    );
    // One acceptor (shard 0) took them all and handed half to shard 1.
    assert_eq!((stats[0].accepted, stats[1].accepted), (40, 0));
    assert_eq!(stats[0].handoffs_out, 20);

    // Long-lived means the counts follow closes: drop 10, and the next 10 all go to fill
    // the gap wherever it is.
    let mut clients = clients;
    clients.truncate(30);
    assert!(wait_until(Duration::from_secs(30), || server
        .handle
        .open_connections()
        .iter()
        .sum::<usize>()
        == 30));
    let before = server.handle.open_connections();
    clients.extend((40..50).map(|i| live_client(server.addr(), i)));
    assert_eq!(
        server.handle.open_connections(),
        vec![20, 20],
        "refilled from {before:?}"
    );

    drop(clients);
    assert!(wait_until(Duration::from_secs(30), || {
        let s = rt.stats();
        server.handle.open_connections() == vec![0, 0]
            && s[0].open_connections == 0
            && s[1].open_connections == 0
    }));
}

#[test]
fn round_robin_cycles_through_every_shard() {
    let rt = common::runtime(3);
    let server = echo::start(&rt, handoff(Placement::RoundRobin), Budget::default(), MIB);
    for i in 0..30 {
        live_client(server.addr(), i);
    }
    assert_eq!(server.handle.placed_connections(), vec![10, 10, 10]);
    let stats = rt.stats();
    assert_eq!(stats[0].handoffs_out, 20);
}

#[test]
fn fixed_placement_puts_everything_on_one_shard() {
    let rt = common::runtime(2);
    let server = echo::start(&rt, handoff(Placement::Fixed(1)), Budget::default(), MIB);
    let clients: Vec<FramedClient> = (0..20).map(|i| live_client(server.addr(), i)).collect();
    assert_eq!(server.handle.placed_connections(), vec![0, 20]);
    assert_eq!(server.handle.open_connections(), vec![0, 20]);
    let stats = rt.stats();
    assert_eq!(
        (stats[0].open_connections, stats[1].open_connections),
        (0, 20)
    );
    assert_eq!(stats[0].handoffs_out, 20);
    drop(clients);
}

/// What a custom policy was shown: peer, acceptor, open connections per shard.
type PlacementCall = (Option<SocketAddr>, usize, Vec<usize>);

/// The policy sees the peer, the acceptor and the current counts, and its choice is obeyed.
#[test]
fn custom_placement_is_honoured() {
    let rt = common::runtime(2);
    let seen: Arc<Mutex<Vec<PlacementCall>>> = Arc::default();
    let log = seen.clone();
    let policy = Placement::Custom(Arc::new(move |input: &PlacementInput<'_>| {
        log.lock()
            .unwrap()
            .push((input.peer, input.acceptor, input.open.to_vec()));
        // Odd client ports to shard 1, even to shard 0.
        input.peer.map_or(0, |p| usize::from(p.port() % 2))
    }));
    let server = echo::start(&rt, handoff(policy), Budget::default(), MIB);
    let clients: Vec<FramedClient> = (0..30).map(|i| live_client(server.addr(), i)).collect();
    let odd = clients
        .iter()
        .filter(|c| c.stream.local_addr().unwrap().port() % 2 == 1)
        .count();
    assert_eq!(
        server.handle.placed_connections(),
        vec![(30 - odd) as u64, odd as u64]
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 30);
    for (i, (peer, acceptor, open)) in seen.iter().enumerate() {
        assert_eq!(
            *peer,
            Some(clients[i].stream.local_addr().unwrap()),
            "peer of connection {i}"
        );
        assert_eq!(*acceptor, 0);
        assert_eq!(open.len(), 2);
        // Every earlier connection is still open, so the counts add up to i.
        assert_eq!(open.iter().sum::<usize>(), i);
    }
}

/// A policy that names a shard that does not exist must not lose the connection.
#[test]
fn out_of_range_placement_falls_back_to_the_acceptor() {
    let rt = common::runtime(2);
    let policy = Placement::Custom(Arc::new(|_: &PlacementInput<'_>| 9));
    let server = echo::start(&rt, handoff(policy), Budget::default(), MIB);
    let _c = live_client(server.addr(), 1);
    assert_eq!(server.handle.placed_connections(), vec![1, 0]);
}

/// The connection reaches its shard intact: the handler runs there, with this listener's
/// budget, and answers from there.
#[test]
fn handed_off_connection_runs_on_its_target_shard() {
    let rt = common::runtime(2);
    let served_on: Arc<Mutex<Vec<(usize, usize, Budget)>>> = Arc::default();
    let log = served_on.clone();
    let budget = Budget::messages(7).with_bytes(1000);
    let handle = corewire_runtime::accept::TcpEndpoint::bind("127.0.0.1:0".parse().unwrap())
        .mode(handoff(Placement::Fixed(1)))
        .budget(budget)
        .serve(&rt, move |accepted| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push((
                    accepted.shard,
                    corewire_runtime::shard_id(),
                    accepted.budget,
                ));
                let cfg = echo::EchoConfig::new(MIB);
                echo::serve_connection(accepted, cfg).await;
            }
        })
        .unwrap();
    let _c = live_client(handle.local_addr(), 3);
    assert_eq!(*served_on.lock().unwrap(), vec![(1, 1, budget)]);
}

/// Every handoff is counted on both sides: out on the acceptor, in on the receiving shard.
#[test]
fn handoffs_are_counted_on_both_shards() {
    let rt = common::runtime(2);
    let server = echo::start(&rt, handoff(Placement::Fixed(1)), Budget::default(), MIB);
    for i in 0..10 {
        live_client(server.addr(), i);
    }
    let stats = rt.stats();
    assert_eq!(stats[0].handoffs_out, 10);
    assert_eq!(stats[1].handoffs_in, 10, "handoffs_in per shard: {stats:?}");
}

/// Stopping a server closes its listeners while connections already open keep being served
/// until their clients leave.
#[test]
fn stop_keeps_open_connections_working() {
    for mode in [AcceptMode::ReusePort, handoff(Placement::LeastConnections)] {
        let rt = common::runtime(2);
        let server = echo::start(&rt, mode.clone(), Budget::default(), MIB);
        let addr = server.addr();
        let mut clients: Vec<FramedClient> = (0..6).map(|i| live_client(addr, i)).collect();
        let counts = server.handle.counts();
        server.handle.stop();

        assert!(
            wait_until(Duration::from_secs(30), || std::net::TcpStream::connect(
                addr
            )
            .is_err()),
            "{mode:?}: still accepting connections after stop"
        );
        for (i, c) in clients.iter_mut().enumerate() {
            for round in 0..5 {
                c.echo(&pattern(100 * i as u64 + round, 4000)).unwrap();
            }
        }
        assert_eq!(counts.open().iter().sum::<usize>(), 6);
        drop(clients);
        assert!(wait_until(Duration::from_secs(30), || counts
            .open()
            .iter()
            .all(|&n| n == 0)));
        assert!(wait_until(Duration::from_secs(30), || sum(
            &rt.stats(),
            |s| s.open_connections
        ) == 0));
    }
}

/// `ListenerHandle::stop` says the listeners are closed when it returns, so a connect right
/// after it must be refused. Today the accept loop drops its listener while the ring's
/// accept still holds the socket; the socket only closes once the queued cancel reaches the
/// kernel, and a connect in between completes its handshake against a server that is gone.
#[test]
fn connect_right_after_stop_is_refused() {
    let mut accepted_after_stop = 0;
    for i in 0..10 {
        let rt = common::runtime(2);
        let server = echo::start(
            &rt,
            handoff(Placement::LeastConnections),
            Budget::default(),
            MIB,
        );
        let addr = server.addr();
        let _open = live_client(addr, i);
        server.handle.stop();
        if std::net::TcpStream::connect(addr).is_ok() {
            accepted_after_stop += 1;
        }
    }
    assert_eq!(
        accepted_after_stop, 0,
        "connects accepted after stop, of 10"
    );
}

/// A listener started from a shard (as a server moving its port while it runs does) is
/// listening when `serve_from_shard` returns, serves on every shard its mode names, and stops
/// like any other; a port already taken is an error and starts nothing.
#[test]
fn a_listener_started_from_a_shard_serves_every_shard() {
    use corewire_runtime::accept::TcpEndpoint;
    for mode in [AcceptMode::ReusePort, handoff(Placement::RoundRobin)] {
        let rt = common::runtime(2);
        let config = echo::EchoConfig::new(MIB);
        let cfg = config.clone();
        let handle = rt
            .run_on(1, move || async move {
                TcpEndpoint::bind("127.0.0.1:0".parse().unwrap())
                    .mode(mode)
                    .serve_from_shard(move |accepted| echo::serve_connection(accepted, cfg.clone()))
            })
            .expect("shard 1 ran")
            .expect("listening");
        let addr = handle.local_addr();
        let clients: Vec<FramedClient> = (0..40).map(|i| live_client(addr, i)).collect();
        let open = handle.open_connections();
        assert_eq!(open.iter().sum::<usize>(), 40);
        assert!(
            open.iter().all(|&n| n > 0),
            "connections per shard: {open:?}"
        );

        let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
        let busy_addr = busy.local_addr().unwrap();
        let taken = rt
            .run_on(0, move || async move {
                TcpEndpoint::bind(busy_addr)
                    .serve_from_shard(|_accepted| async {})
                    .map(|h| h.local_addr())
            })
            .expect("shard 0 ran");
        assert_eq!(
            taken.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::AddrInUse)
        );

        handle.stop();
        assert!(std::net::TcpStream::connect(addr).is_err());
        drop(clients);
        assert!(config.counters.messages() >= 40);
    }
}

/// `ListenerHandle::close_now`: from the moment it returns, connecting is refused and the
/// address can be bound again (every shard's listener, both modes), while a connection
/// already open carries on.
#[test]
fn close_now_refuses_at_once_and_frees_the_address() {
    for mode in [AcceptMode::ReusePort, handoff(Placement::LeastConnections)] {
        let rt = common::runtime(2);
        let server = echo::start(&rt, mode.clone(), Budget::default(), MIB);
        let addr = server.addr();
        let mut open = live_client(addr, 1);
        server.handle.close_now();
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "{mode:?}: a connection after close_now"
        );
        let again = std::net::TcpListener::bind(addr);
        assert!(
            again.is_ok(),
            "{mode:?}: binding the address again: {again:?}"
        );
        open.echo(&pattern(2, 32))
            .expect("the open connection still echoes");
    }
}
