//! Shutting a busy runtime down: prompt, every shard thread joined, every task dropped, the
//! stop hooks run after that, and every descriptor the runtime opened (rings, eventfds,
//! listeners, sockets) closed again.

mod common;

use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use corewire_runtime::accept::AcceptMode;
use corewire_runtime::net::TcpStream;
use corewire_runtime::{shard_id, sleep, spawn_local, Budget, Runtime};

use common::client::FramedClient;
use common::echo;
use common::process::{fd_targets, open_fds, serial, threads_gone, threads_named, wait_until};

/// Counts its own drop: proves a task was dropped, not just forgotten.
struct DropFlag(Arc<AtomicUsize>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Flags {
    started: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

impl Flags {
    fn new() -> Flags {
        Flags {
            started: Arc::default(),
            dropped: Arc::default(),
        }
    }
}

/// On the current shard: a task sleeping for an hour, and a client connection to `addr`
/// parked in a recv that will never complete.
fn park_tasks_here(addr: SocketAddr, started: Arc<AtomicUsize>, dropped: Arc<AtomicUsize>) {
    let (s, d) = (started.clone(), dropped.clone());
    spawn_local(async move {
        let _flag = DropFlag(d);
        s.fetch_add(1, Ordering::SeqCst);
        sleep(Duration::from_secs(3600)).await;
    });
    spawn_local(async move {
        let _flag = DropFlag(dropped);
        let stream = TcpStream::connect(addr).await.expect("connect");
        started.fetch_add(1, Ordering::SeqCst);
        let (res, _buf) = stream.recv(BytesMut::with_capacity(1024), 1024).await;
        panic!("the echo server never speaks first, yet recv returned {res:?}");
    });
}

#[test]
fn busy_runtime_shuts_down_promptly_and_releases_everything() {
    const SHARDS: usize = 3;
    let _serial = serial();
    let baseline_fds = open_fds();
    let baseline_targets = fd_targets();
    assert!(threads_gone("sdtest-shard"));

    let hooks_ran = Arc::new(AtomicUsize::new(0));
    let flags = Flags::new();
    let hooks = hooks_ran.clone();
    let dropped_at_stop = flags.dropped.clone();
    let dropped_seen_by_hook = Arc::new(AtomicUsize::new(0));
    let seen = dropped_seen_by_hook.clone();
    let rt = Runtime::builder()
        .shards(SHARDS)
        .pin(false)
        .name("sdtest")
        .on_shard_stop(move |_| {
            hooks.fetch_add(1, Ordering::SeqCst);
            seen.fetch_max(dropped_at_stop.load(Ordering::SeqCst), Ordering::SeqCst);
        })
        .build()
        .unwrap();
    assert_eq!(threads_named("sdtest-shard"), SHARDS);

    // Listeners on every shard, connections from outside idling in the server's recv.
    let server = echo::start(&rt, AcceptMode::ReusePort, Budget::default(), 1 << 20);
    let addr = server.addr();
    let mut outside: Vec<FramedClient> = (0..6)
        .map(|i| {
            let mut c = FramedClient::connect(addr).unwrap();
            c.echo(&[i; 10]).unwrap();
            c
        })
        .collect();

    // A peer that accepts nothing and reads nothing: a send to it blocks in the kernel.
    let sink = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let sink_addr = sink.local_addr().unwrap();

    // On every shard: an hour-long sleep and a recv that never completes; on shard 1 also a
    // send that never completes.
    for shard in 0..SHARDS {
        let (s, d) = (flags.started.clone(), flags.dropped.clone());
        let (s2, d2) = (flags.started.clone(), flags.dropped.clone());
        rt.run_on(shard, move || async move {
            park_tasks_here(addr, s, d);
            if shard_id() == 1 {
                spawn_local(async move {
                    let _flag = DropFlag(d2);
                    let stream = TcpStream::connect(sink_addr).await.expect("connect sink");
                    s2.fetch_add(1, Ordering::SeqCst);
                    let res = stream.send_all(Bytes::from(vec![0u8; 256 << 20])).await;
                    panic!("nobody reads the sink, yet send_all returned {res:?}");
                });
            }
        })
        .unwrap();
    }
    let parked = 2 * SHARDS + 1;
    assert!(wait_until(Duration::from_secs(10), || flags
        .started
        .load(Ordering::SeqCst)
        == parked));
    // The shard-side clients are connections of the server too.
    assert!(wait_until(Duration::from_secs(10), || server
        .handle
        .open_connections()
        .iter()
        .sum::<usize>()
        == 6 + SHARDS));

    let began = Instant::now();
    rt.shutdown();
    let took = began.elapsed();

    // Prompt means not waiting for the hour-long sleep or the send nobody reads; the bound is
    // generous so a loaded machine cannot fail it.
    assert!(took < Duration::from_secs(30), "shutdown took {took:?}");
    assert!(threads_gone("sdtest-shard"), "shard threads not joined");
    assert_eq!(hooks_ran.load(Ordering::SeqCst), SHARDS);
    assert_eq!(flags.dropped.load(Ordering::SeqCst), parked);
    assert_eq!(
        dropped_seen_by_hook.load(Ordering::SeqCst),
        parked,
        "a stop hook ran before the tasks were dropped"
    );
    // The server's sockets were closed by the shutdown: clients read end-of-stream.
    for c in &mut outside {
        let mut byte = [0u8; 1];
        let n = c.stream.read(&mut byte).unwrap_or(0);
        assert_eq!(n, 0);
    }
    assert_eq!(server.handle.open_connections().iter().sum::<usize>(), 0);

    drop(outside);
    drop(sink);
    drop(server);
    assert!(
        wait_until(Duration::from_secs(10), || open_fds() == baseline_fds),
        "fds {} -> {}\nbefore: {:?}\nafter: {:?}",
        baseline_fds,
        open_fds(),
        baseline_targets,
        fd_targets()
    );
}

/// A ListenerHandle kept after its runtime shut down must not keep the runtime's descriptors
/// open. The accept loops parked their wakers in the handle's stop signal; each waker holds
/// its shard's remote, and the remote owns the shard's wake-up eventfd.
#[test]
fn server_handle_outliving_its_runtime_holds_no_descriptors() {
    let _serial = serial();
    let baseline_fds = open_fds();
    let baseline_targets = fd_targets();
    let rt = common::runtime(2);
    let server = echo::start(&rt, AcceptMode::ReusePort, Budget::default(), 1 << 20);
    let mut c = FramedClient::connect(server.addr()).unwrap();
    c.echo(b"x").unwrap();
    drop(c);
    rt.shutdown();
    assert!(
        wait_until(Duration::from_secs(10), || open_fds() == baseline_fds),
        "fds {} -> {} with the handle alive\nbefore: {:?}\nafter: {:?}",
        baseline_fds,
        open_fds(),
        baseline_targets,
        fd_targets()
    );
    drop(server);
}

#[test]
fn dropping_the_runtime_shuts_it_down() {
    let _serial = serial();
    let baseline_fds = open_fds();
    let dropped = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let rt = Runtime::builder()
        .shards(2)
        .pin(false)
        .name("droptest")
        .build()
        .unwrap();
    for shard in 0..2 {
        let (s, d) = (started.clone(), dropped.clone());
        rt.spawn_on(shard, move || async move {
            let _flag = DropFlag(d);
            s.fetch_add(1, Ordering::SeqCst);
            sleep(Duration::from_secs(3600)).await;
        });
    }
    assert!(wait_until(Duration::from_secs(30), || started
        .load(Ordering::SeqCst)
        == 2));
    let began = Instant::now();
    drop(rt);
    assert!(began.elapsed() < Duration::from_secs(30));
    assert_eq!(dropped.load(Ordering::SeqCst), 2);
    assert!(threads_gone("droptest-shard"));
    assert!(
        wait_until(Duration::from_secs(10), || open_fds() == baseline_fds),
        "fds {} -> {}",
        baseline_fds,
        open_fds()
    );
}
