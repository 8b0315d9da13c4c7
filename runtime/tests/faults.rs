//! Misbehaving peers on a one-shard server: each bad connection is closed on its own, counted,
//! and leaves nothing behind, while a well-behaved client on the same shard keeps getting
//! correct answers; a peer that never reads stalls only itself; a hot connection that keeps
//! exhausting its budget does not starve a probe.

mod common;

use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use corewire_runtime::accept::AcceptMode;
use corewire_runtime::Budget;

use common::client::{frame, pattern, FramedClient};
use common::echo::{self, EchoServer};
use common::process::{fd_targets, open_fds, serial, wait_until};

const MAX_MSG: usize = 64 * 1024;

fn one_shard_server(budget: Budget) -> (corewire_runtime::Runtime, EchoServer) {
    let rt = common::runtime(1);
    let server = echo::start(&rt, AcceptMode::ReusePort, budget, MAX_MSG);
    (rt, server)
}

/// Ways a peer can break the framing or vanish.
#[derive(Debug, Clone, Copy)]
enum Misbehaviour {
    /// Bytes that are not frames (their first four read as a huge length).
    Garbage,
    /// A well-formed prefix declaring one byte more than the server accepts.
    Oversize,
    /// A prefix and part of its body, then end-of-stream.
    TruncatedFrame,
    /// Half a prefix, then end-of-stream.
    ClosedMidPrefix,
    /// Part of a frame, then a reset instead of a clean close.
    ResetMidFrame,
}

const ALL: [Misbehaviour; 5] = [
    Misbehaviour::Garbage,
    Misbehaviour::Oversize,
    Misbehaviour::TruncatedFrame,
    Misbehaviour::ClosedMidPrefix,
    Misbehaviour::ResetMidFrame,
];

impl Misbehaviour {
    /// Whether the server must count it in `protocol_errors` (a reset is the peer leaving,
    /// not a framing error).
    fn is_protocol_error(self) -> bool {
        !matches!(self, Misbehaviour::ResetMidFrame)
    }

    /// Misbehave on a fresh connection and wait until the server has closed it (for the
    /// reset, until the client side is gone). The server must never echo anything back.
    fn run(self, addr: SocketAddr) -> io::Result<()> {
        let mut c = FramedClient::connect(addr)?;
        match self {
            Misbehaviour::Garbage => {
                c.stream
                    .write_all(b"\xde\xad\xbe\xef is not a frame at all")?;
            }
            Misbehaviour::Oversize => {
                let mut bytes = ((MAX_MSG + 1) as u32).to_le_bytes().to_vec();
                bytes.extend_from_slice(&[7; 100]);
                c.stream.write_all(&bytes)?;
            }
            Misbehaviour::TruncatedFrame => {
                let whole = frame(&pattern(1, 1000));
                c.stream.write_all(&whole[..300])?;
                c.shutdown_write()?;
            }
            Misbehaviour::ClosedMidPrefix => {
                c.stream.write_all(&[5, 0])?;
                c.shutdown_write()?;
            }
            Misbehaviour::ResetMidFrame => {
                let whole = frame(&pattern(2, 1000));
                c.stream.write_all(&whole[..500])?;
                socket2::SockRef::from(&c.stream).set_linger(Some(Duration::ZERO))?;
                return Ok(());
            }
        }
        let echoed = c.read_until_closed()?;
        if echoed != 0 {
            return Err(io::Error::other(format!(
                "{self:?}: server echoed {echoed} bytes"
            )));
        }
        Ok(())
    }
}

/// A well-behaved client on its own thread, checking every echo until told to stop.
struct GoodClient {
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    thread: JoinHandle<io::Result<()>>,
}

impl GoodClient {
    fn start(addr: SocketAddr) -> GoodClient {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicU64::new(0));
        let (s, r) = (stop.clone(), rounds.clone());
        let thread = std::thread::spawn(move || {
            let mut c = FramedClient::connect(addr)?;
            let mut i = 0u64;
            while !s.load(Ordering::Relaxed) {
                c.echo(&pattern(i, (i as usize * 37) % 5000))?;
                r.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
            Ok(())
        });
        GoodClient {
            stop,
            rounds,
            thread,
        }
    }

    fn wait_for_rounds(&self, n: u64) {
        assert!(
            wait_until(Duration::from_secs(10), || self
                .rounds
                .load(Ordering::Relaxed)
                >= n),
            "good client stalled"
        );
    }

    /// Stop and return how many round trips succeeded; panics on any failed one.
    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .expect("good client thread")
            .expect("good client saw an error");
        self.rounds.load(Ordering::Relaxed)
    }
}

#[test]
fn each_bad_peer_closes_only_its_own_connection() {
    let _serial = serial();
    let (rt, server) = one_shard_server(Budget::default());
    let addr = server.addr();
    let good = GoodClient::start(addr);
    good.wait_for_rounds(10);
    let mut protocol_errors = 0;
    for (n, bad) in ALL.into_iter().enumerate() {
        let before = good.rounds.load(Ordering::Relaxed);
        bad.run(addr).unwrap_or_else(|e| panic!("{bad:?}: {e}"));
        if bad.is_protocol_error() {
            protocol_errors += 1;
        }
        // The server counts before it closes, and the client saw the close.
        assert!(
            wait_until(Duration::from_secs(30), || server
                .config
                .counters
                .connections_ended
                .load(Ordering::SeqCst)
                == n as u64 + 1),
            "{bad:?}: server did not close the connection"
        );
        assert_eq!(
            rt.stats()[0].protocol_errors,
            protocol_errors,
            "after {bad:?}"
        );
        // The good client keeps going between and after the faults.
        good.wait_for_rounds(before + 10);
    }
    assert!(good.finish() > 50);
    assert!(wait_until(Duration::from_secs(30), || rt.stats()[0]
        .open_connections
        == 0));
}

#[test]
fn two_hundred_bad_connections_leave_no_leaks() {
    let _serial = serial();
    let (rt, server) = one_shard_server(Budget::default());
    let addr = server.addr();
    let mut good = FramedClient::connect(addr).unwrap();
    good.echo(b"warm-up").unwrap();
    let baseline_fds = open_fds();
    let baseline_targets = fd_targets();

    let mut expected_errors = 0;
    for i in 0..200u64 {
        let bad = ALL[i as usize % ALL.len()];
        bad.run(addr)
            .unwrap_or_else(|e| panic!("#{i} {bad:?}: {e}"));
        expected_errors += u64::from(bad.is_protocol_error());
        if i % 20 == 0 {
            good.echo(&pattern(i, 3000)).unwrap();
        }
    }

    // A reset connection may still sit in the accept queue when its client returns: wait
    // for the server to have ended all 200 before comparing.
    let ended = || {
        server
            .config
            .counters
            .connections_ended
            .load(Ordering::SeqCst)
    };
    let settled = wait_until(Duration::from_secs(10), || {
        ended() == 200
            && rt.stats()[0].open_connections == 1
            && server.handle.open_connections() == vec![1]
            && open_fds() == baseline_fds
    });
    assert!(
        settled,
        "ended={} open={} handle={:?} fds {} -> {}\nbefore: {:?}\nafter: {:?}",
        ended(),
        rt.stats()[0].open_connections,
        server.handle.open_connections(),
        baseline_fds,
        open_fds(),
        baseline_targets,
        fd_targets()
    );
    assert_eq!(rt.stats()[0].protocol_errors, expected_errors);
    assert_eq!(rt.stats()[0].accepted, 201);
    good.echo(b"still here").unwrap();
}

/// A peer that sends without ever reading: the server must stop reading from it once its
/// replies back up (the connection stalls) instead of buffering the stream in memory, and
/// the rest of the shard must not notice.
///
/// The bound: everything the server has read is either still in its hands (at most
/// `max_buffered_per_connection`) or was handed to the kernel as replies, which sit in the
/// server socket's send buffer or the client's receive queue — neither of which can exceed
/// its configured maximum. A server that buffered without limit would read the whole 64 MiB.
#[test]
fn a_client_that_never_reads_stalls_only_its_own_connection() {
    const TARGET: usize = 64 << 20;
    let _serial = serial();
    let (rt, server) = one_shard_server(Budget::default());
    let addr = server.addr();

    let hog = std::net::TcpStream::connect(addr).unwrap();
    socket2::SockRef::from(&hog)
        .set_recv_buffer_size(64 * 1024)
        .unwrap();
    let hog_rcvbuf = socket2::SockRef::from(&hog).recv_buffer_size().unwrap();
    hog.set_nonblocking(true).unwrap();
    let chunk: Vec<u8> = (0..64)
        .flat_map(|i| frame(&pattern(i, 16 * 1024 - 4)))
        .collect();

    let mut hog = hog;
    let mut sent = 0usize;
    let mut offset = 0usize;
    let mut last_progress = Instant::now();
    while sent < TARGET && last_progress.elapsed() < Duration::from_secs(1) {
        match hog.write(&chunk[offset..]) {
            Ok(n) => {
                sent += n;
                offset = (offset + n) % chunk.len();
                last_progress = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("hog write: {e}"),
        }
    }
    assert!(sent < TARGET, "the server absorbed all {sent} bytes");

    let read = server.config.counters.bytes_read() as usize;
    // The kernel checks buffer limits before it queues each segment, so it can overshoot a
    // limit by a segment or so: 1 MiB of slack covers that, and is still far from 64 MiB.
    let slack = 1 << 20;
    let bound = server.config.max_buffered_per_connection() + tcp_wmem_max() + hog_rcvbuf + slack;
    assert!(
        read <= bound,
        "server read {read} bytes from a peer that never reads; bound {bound}"
    );

    // Same shard, other connection: unaffected.
    let mut probe = FramedClient::connect(addr).unwrap();
    for i in 0..20 {
        probe.echo(&pattern(i, 10_000)).unwrap();
    }
    assert_eq!(server.handle.open_connections(), vec![2]);

    // The stalled connection ends as soon as its peer goes away.
    drop(hog);
    assert!(wait_until(Duration::from_secs(10), || server
        .handle
        .open_connections()
        == vec![1]));
    probe.echo(b"after the hog left").unwrap();
    assert_eq!(rt.stats()[0].open_connections, 1);
}

/// The largest send buffer the kernel grows a TCP socket to on its own.
fn tcp_wmem_max() -> usize {
    let s = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").expect("tcp_wmem");
    s.split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .expect("tcp_wmem max")
}

/// With a budget of 4 messages per round, a connection that pipelines thousands of frames
/// exhausts it again and again (and yields each time) while a probe on the same shard keeps
/// getting its replies, and the hot stream itself stays correct.
#[test]
fn exhausted_budget_yields_to_a_probe_on_the_same_shard() {
    let _serial = serial();
    let (rt, server) = one_shard_server(Budget::messages(4));
    let addr = server.addr();

    let hot = FramedClient::connect(addr).unwrap();
    let reader = hot.stream.try_clone().unwrap();
    let mut writer = hot.stream;
    let stop = Arc::new(AtomicBool::new(false));
    let frames_sent = Arc::new(AtomicU64::new(0));
    let (stop_w, sent_w) = (stop.clone(), frames_sent.clone());
    let writer = std::thread::spawn(move || -> io::Result<()> {
        let mut next = 0u64;
        while !stop_w.load(Ordering::Relaxed) {
            let batch: Vec<u8> = (next..next + 1000)
                .flat_map(|i| frame(&i.to_le_bytes()))
                .collect();
            writer.write_all(&batch)?;
            next += 1000;
            sent_w.store(next, Ordering::Relaxed);
        }
        writer.shutdown(std::net::Shutdown::Write)
    });
    let hot_reader = std::thread::spawn(move || -> io::Result<u64> {
        let mut stream = FramedClient { stream: reader };
        let mut next = 0u64;
        loop {
            let payload = match stream.read_frame() {
                Ok(p) => p,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(next),
                Err(e) => return Err(e),
            };
            if payload != next.to_le_bytes() {
                return Err(io::Error::other(format!(
                    "hot frame {next} came back wrong"
                )));
            }
            next += 1;
        }
    });
    // Let the hot connection get going, then probe while it runs.
    assert!(wait_until(Duration::from_secs(10), || frames_sent
        .load(Ordering::Relaxed)
        >= 20_000));
    // Frames the writer has sent may still sit in the socket buffers: wait for the shard to
    // have read enough of them to run out of budget.
    assert!(
        wait_until(Duration::from_secs(10), || rt.stats()[0].budget_exhausted
            > 0),
        "the hot connection never exhausted its budget"
    );
    let exhausted_before_probe = rt.stats()[0].budget_exhausted;

    let mut probe = FramedClient::connect(addr).unwrap();
    for i in 0..50 {
        probe.echo(&pattern(i, 100)).unwrap();
    }
    let hot_still_running = !writer.is_finished();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap().unwrap();
    let echoed = hot_reader.join().unwrap().unwrap();

    assert!(
        hot_still_running,
        "the probe ran after the hot stream ended"
    );
    assert_eq!(echoed, frames_sent.load(Ordering::Relaxed));
    assert!(rt.stats()[0].budget_exhausted > exhausted_before_probe);
}
