//! The socket glue of the open-loop load: client threads, each busy-polling its connections
//! (non-blocking sockets, `epoll_wait` with a zero timeout) so requests leave when due to
//! within a loop pass, not a timer tick. Meant to run alone on its CPUs (taskset).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use serde::Serialize;

use super::replies::{ReplyOrder, Wire};
use super::schedule::{Account, Schedule};
use crate::latency::{round2, LatencyHistogram, LatencySummary};
use crate::report::MachineNote;

/// How long the run waits after the window for replies still owed before charging them.
const DRAIN: Duration = Duration::from_secs(1);
/// Bytes read per `read` call.
const READ_CHUNK: usize = 64 * 1024;

/// An open-loop (or, with rate 0, closed-loop) run.
#[derive(Debug, Clone)]
pub struct OpenLoopConfig {
    pub addr: SocketAddr,
    pub wire: Wire,
    /// Requests per second over all connections; 0: closed loop.
    pub rate: f64,
    pub conns: usize,
    /// Requests outstanding per connection at most (the closed loop's depth).
    pub max_in_flight: usize,
    pub threads: usize,
    pub warmup: Duration,
    pub duration: Duration,
}

/// The run's one JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct OpenLoopReport {
    pub mode: &'static str,
    pub addr: String,
    pub proto: &'static str,
    pub target_rate: f64,
    pub conns: usize,
    pub max_in_flight: usize,
    pub threads: usize,
    pub warmup_ms: u64,
    pub duration_ms: u64,
    /// Measured requests answered.
    pub requests: u64,
    /// Measured requests never answered (charged up to the end of the drain).
    pub unanswered: u64,
    pub errors: u64,
    /// Replies to measured requests per second of window.
    pub qps: f64,
    #[serde(flatten)]
    pub latency: LatencySummary,
    #[serde(flatten)]
    pub machine: MachineNote,
}

#[derive(Default)]
struct ThreadTotals {
    latency: LatencyHistogram,
    answered: u64,
    unanswered: u64,
    errors: u64,
}

/// Runs `cfg` and reports.
pub fn run(cfg: &OpenLoopConfig) -> OpenLoopReport {
    let threads = cfg.threads.clamp(1, cfg.conns.max(1));
    let barrier = Arc::new(Barrier::new(threads));
    let origin = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            // Connections dealt round-robin; each thread's rate is its connections' share.
            let conns = (t..cfg.conns).step_by(threads).collect::<Vec<_>>();
            let cfg = cfg.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || drive(&cfg, &conns, origin, &barrier))
        })
        .collect();
    let mut total = ThreadTotals::default();
    for h in handles {
        match h.join() {
            Ok(t) => {
                total.latency.merge(&t.latency);
                total.answered += t.answered;
                total.unanswered += t.unanswered;
                total.errors += t.errors;
            }
            Err(_) => total.errors += 1,
        }
    }
    OpenLoopReport {
        mode: if cfg.rate > 0.0 {
            "open-loop"
        } else {
            "closed-loop"
        },
        addr: cfg.addr.to_string(),
        proto: cfg.wire.name(),
        target_rate: cfg.rate,
        conns: cfg.conns,
        max_in_flight: cfg.max_in_flight,
        threads,
        warmup_ms: cfg.warmup.as_millis() as u64,
        duration_ms: cfg.duration.as_millis() as u64,
        requests: total.answered,
        unanswered: total.unanswered,
        errors: total.errors,
        qps: round2(total.answered as f64 / cfg.duration.as_secs_f64()),
        latency: total.latency.summary(),
        machine: MachineNote::current(),
    }
}

struct Conn {
    stream: TcpStream,
    account: Account,
    next_request: u64,
    order: ReplyOrder,
    out: Vec<u8>,
    written: usize,
    input: Vec<u8>,
    dead: bool,
}

fn drive(cfg: &OpenLoopConfig, ids: &[usize], origin: Instant, barrier: &Barrier) -> ThreadTotals {
    let mut totals = ThreadTotals::default();
    let now_ns = || origin.elapsed().as_nanos() as u64;
    let poll = Poll::new();
    let mut streams = Vec::new();
    for _ in ids {
        match std::net::TcpStream::connect(cfg.addr).and_then(|s| {
            s.set_nodelay(true)?;
            s.set_nonblocking(true)?;
            Ok(s)
        }) {
            Ok(s) => streams.push(TcpStream::from_std(s)),
            Err(e) => {
                eprintln!("openloop: connect {}: {e}", cfg.addr);
                totals.errors += 1;
            }
        }
    }
    // Every thread connects before any sends: the window measures serving, not connecting.
    barrier.wait();
    let Ok(mut poll) = poll else {
        totals.errors += 1;
        return totals;
    };
    let start = now_ns();
    let window = (
        start + cfg.warmup.as_nanos() as u64,
        start + (cfg.warmup + cfg.duration).as_nanos() as u64,
    );
    let per_conn_rate = cfg.rate / cfg.conns.max(1) as f64;
    let interval = if per_conn_rate > 0.0 {
        1e9 / per_conn_rate
    } else {
        0.0
    };
    let mut conns: Vec<Conn> = Vec::with_capacity(streams.len());
    for (i, mut stream) in streams.into_iter().enumerate() {
        if let Err(e) = poll.registry().register(
            &mut stream,
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            eprintln!("openloop: register: {e}");
            totals.errors += 1;
            continue;
        }
        // Connections' phases are spread over one interval, so the sends are too.
        let phase = (interval * ids[i] as f64 / cfg.conns.max(1) as f64) as u64;
        conns.push(Conn {
            stream,
            account: Account::new(
                Schedule::new(start, phase, per_conn_rate),
                cfg.max_in_flight,
                window,
            ),
            next_request: ids[i] as u64,
            order: ReplyOrder {
                next: ids[i] as u64,
                step: cfg.conns as u64,
            },
            out: Vec::new(),
            written: 0,
            input: Vec::with_capacity(READ_CHUNK),
            dead: false,
        });
    }
    let mut events = Events::with_capacity(1024);
    let give_up = window.1 + DRAIN.as_nanos() as u64;
    loop {
        let now = now_ns();
        let busy = conns
            .iter()
            .any(|c| !c.dead && (c.account.waiting() || now < window.1));
        if !busy || now >= give_up {
            break;
        }
        for c in conns.iter_mut().filter(|c| !c.dead) {
            for _ in 0..c.account.send_due(now) {
                cfg.wire.write_request(c.next_request, &mut c.out);
                c.next_request += cfg.conns as u64;
            }
            if c.written < c.out.len() {
                if let Err(e) = flush(c) {
                    eprintln!("openloop: write: {e}");
                    c.dead = true;
                    totals.errors += 1;
                }
            }
        }
        if let Err(e) = poll.poll(&mut events, Some(Duration::ZERO)) {
            eprintln!("openloop: poll: {e}");
            totals.errors += 1;
            break;
        }
        for ev in events.iter() {
            let Some(c) = conns.get_mut(ev.token().0) else {
                continue;
            };
            if c.dead || !ev.is_readable() {
                continue;
            }
            if let Err(e) = read_replies(c, cfg.wire, now_ns()) {
                eprintln!("openloop: connection: {e}");
                c.dead = true;
                totals.errors += 1;
            }
        }
    }
    let end = now_ns();
    for c in &mut conns {
        c.account.finish(end);
        totals.latency.merge(&c.account.latency);
        totals.answered += c.account.answered;
        totals.unanswered += c.account.unanswered;
    }
    totals
}

fn flush(c: &mut Conn) -> io::Result<()> {
    while c.written < c.out.len() {
        match c.stream.write(&c.out[c.written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => c.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if c.written == c.out.len() {
        c.out.clear();
        c.written = 0;
    }
    Ok(())
}

fn read_replies(c: &mut Conn, wire: Wire, now: u64) -> Result<(), String> {
    loop {
        let at = c.input.len();
        c.input.resize(at + READ_CHUNK, 0);
        match c.stream.read(&mut c.input[at..]) {
            Ok(0) => {
                c.input.truncate(at);
                return Err("server closed the connection".into());
            }
            Ok(n) => c.input.truncate(at + n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                c.input.truncate(at);
                return Ok(());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                c.input.truncate(at);
                continue;
            }
            Err(e) => return Err(e.to_string()),
        }
        let (used, replies) = wire.complete(&c.input, &mut c.order).map_err(|e| e.0)?;
        c.input.drain(..used);
        c.account
            .replied(replies, now)
            .map_err(|extra| format!("{extra} replies to requests never sent"))?;
    }
}
