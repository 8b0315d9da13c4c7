//! Closed-loop echo load from shards: each connection keeps up to `depth` requests in
//! flight, checks every byte of every reply, and records each request's round-trip time.
//!
//! A connection is two tasks on one shard sharing the socket: a writer that sends batches of
//! requests as credits allow, and a reader that verifies replies and returns credits. Split
//! that way, a deep pipeline of large messages cannot deadlock (a single task blocked in a
//! send would stop reading the replies the server is blocked sending). When the writer is
//! done it half-closes the socket; the server answers everything and closes, which is how
//! the reader knows no reply is missing.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use corewire::runtime::net::TcpStream;
use corewire::{spawn_local, Runtime};
use hdrhistogram::Histogram;

use super::connection::READ_CHUNK;
use super::frame_batch::FrameBatch;
use super::frame_reader::{FrameReader, ProtocolError};
use super::window::Window;

/// When the load stops sending.
#[derive(Debug, Clone, Copy)]
pub enum StopAfter {
    /// This many requests in total, spread evenly over the connections.
    Messages(u64),
    /// Send for this long, then wait for the replies still in flight.
    Duration(Duration),
}

#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub addr: SocketAddr,
    pub conns: usize,
    /// Requests in flight per connection.
    pub depth: usize,
    /// Payload bytes per request.
    pub size: usize,
    pub stop: StopAfter,
}

/// What went wrong on which connection.
#[derive(Debug)]
pub enum LoadError {
    Connect {
        conn: usize,
        source: io::Error,
    },
    Io {
        conn: usize,
        source: io::Error,
    },
    /// The reply stream broke the framing (or a reply was longer than any request).
    Protocol {
        conn: usize,
        source: ProtocolError,
    },
    /// Reply `message` differs from its request.
    Mismatch {
        conn: usize,
        message: u64,
    },
    /// A reply arrived with no request outstanding.
    UnexpectedReply {
        conn: usize,
    },
    /// The server closed with requests unanswered.
    ClosedEarly {
        conn: usize,
        sent: Option<u64>,
        received: u64,
    },
    /// A connection's task ended without a result (it panicked or its shard stopped).
    Aborted {
        conn: usize,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Connect { conn, source } => write!(f, "conn {conn}: connect: {source}"),
            LoadError::Io { conn, source } => write!(f, "conn {conn}: {source}"),
            LoadError::Protocol { conn, source } => write!(f, "conn {conn}: {source}"),
            LoadError::Mismatch { conn, message } => {
                write!(f, "conn {conn}: reply {message} differs from its request")
            }
            LoadError::UnexpectedReply { conn } => {
                write!(f, "conn {conn}: reply with no request outstanding")
            }
            LoadError::ClosedEarly {
                conn,
                sent,
                received,
            } => match sent {
                Some(sent) => write!(
                    f,
                    "conn {conn}: server closed after {received} of {sent} replies"
                ),
                None => write!(
                    f,
                    "conn {conn}: server closed while requests were still being sent \
                     ({received} replies)"
                ),
            },
            LoadError::Aborted { conn } => write!(f, "conn {conn}: task aborted"),
        }
    }
}

impl std::error::Error for LoadError {}

/// The outcome of a load run.
pub struct LoadReport {
    /// Verified replies.
    pub messages: u64,
    /// Payload bytes echoed back.
    pub payload_bytes: u64,
    pub elapsed: Duration,
    /// Round-trip times in nanoseconds.
    pub latency_ns: Histogram<u64>,
}

impl LoadReport {
    pub fn qps(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn latency(&self, quantile: f64) -> Duration {
        Duration::from_nanos(self.latency_ns.value_at_quantile(quantile))
    }
}

fn new_histogram() -> Histogram<u64> {
    // 1 ns to 100 s at 3 significant digits.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// Run `spec` on `rt`'s shards (connection `i` on shard `i % shards`) and wait for it.
pub fn run_load(rt: &Runtime, spec: &LoadSpec) -> Result<LoadReport, LoadError> {
    let started = Instant::now();
    let deadline = match spec.stop {
        StopAfter::Duration(d) => Some(started + d),
        StopAfter::Messages(_) => None,
    };
    let conns = spec.conns.max(1);
    let handles: Vec<_> = (0..conns)
        .map(|conn| {
            let quota = match spec.stop {
                StopAfter::Messages(total) => {
                    let share =
                        total / conns as u64 + u64::from((conn as u64) < total % conns as u64);
                    Some(share)
                }
                StopAfter::Duration(_) => None,
            };
            let job = ConnJob {
                conn,
                addr: spec.addr,
                depth: spec.depth.max(1),
                size: spec.size,
                quota,
                deadline,
            };
            rt.spawn_on(conn % rt.shard_count(), move || job.run())
        })
        .collect();
    let mut report = LoadReport {
        messages: 0,
        payload_bytes: 0,
        elapsed: Duration::ZERO,
        latency_ns: new_histogram(),
    };
    let mut first_error = None;
    for (conn, handle) in handles.into_iter().enumerate() {
        match handle.wait() {
            Ok(Ok(done)) => {
                report.messages += done.messages;
                report.payload_bytes += done.messages * spec.size as u64;
                report
                    .latency_ns
                    .add(&done.latency_ns)
                    .expect("histograms with equal bounds merge");
            }
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(LoadError::Aborted { conn });
            }
        }
    }
    report.elapsed = started.elapsed();
    match first_error {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

struct ConnReport {
    messages: u64,
    latency_ns: Histogram<u64>,
}

/// Request payloads: slices of one random-looking pool at offsets that vary per request,
/// so a reply that belongs to another request (or is shifted) never matches.
struct Payloads {
    pool: Bytes,
    size: usize,
}

const OFFSETS: usize = 251;

impl Payloads {
    fn new(seed: u64, size: usize) -> Payloads {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let pool: Vec<u8> = (0..size + OFFSETS)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        Payloads {
            pool: pool.into(),
            size,
        }
    }

    fn request(&self, message: u64) -> Bytes {
        let offset = (message % OFFSETS as u64) as usize;
        self.pool.slice(offset..offset + self.size)
    }
}

/// State the writer and reader of one connection share (on one shard).
struct Pipeline {
    window: Window,
    /// Send time of each request still awaiting its reply, oldest first.
    in_flight: RefCell<VecDeque<Instant>>,
    /// Set by the writer once it sent its last request.
    sent_total: Cell<Option<u64>>,
}

struct ConnJob {
    conn: usize,
    addr: SocketAddr,
    depth: usize,
    size: usize,
    quota: Option<u64>,
    deadline: Option<Instant>,
}

impl ConnJob {
    async fn run(self) -> Result<ConnReport, LoadError> {
        let conn = self.conn;
        let stream = TcpStream::connect(self.addr)
            .await
            .map_err(|source| LoadError::Connect { conn, source })?;
        let stream = Rc::new(stream);
        let pipeline = Rc::new(Pipeline {
            window: Window::new(self.depth),
            in_flight: RefCell::new(VecDeque::with_capacity(self.depth)),
            sent_total: Cell::new(None),
        });
        let payloads = Rc::new(Payloads::new(conn as u64, self.size));
        let writer = spawn_local(write_requests(
            stream.clone(),
            pipeline.clone(),
            payloads.clone(),
            self.quota,
            self.deadline,
            self.depth,
        ));
        let read = read_replies(&stream, &pipeline, &payloads, conn).await;
        // Whatever happened to the replies, the writer must not wait for credits forever.
        pipeline.window.close();
        let written = writer.await.map_err(|_| LoadError::Aborted { conn })?;
        let report = read?;
        written.map_err(|source| LoadError::Io { conn, source })?;
        Ok(report)
    }
}

async fn write_requests(
    stream: Rc<TcpStream>,
    pipeline: Rc<Pipeline>,
    payloads: Rc<Payloads>,
    quota: Option<u64>,
    deadline: Option<Instant>,
    depth: usize,
) -> io::Result<()> {
    let mut sent = 0u64;
    let result = send_requests(
        &stream, &pipeline, &payloads, quota, deadline, depth, &mut sent,
    )
    .await;
    pipeline.sent_total.set(Some(sent));
    // End of requests: the server answers the rest, then closes, which ends the reader.
    let _ = stream.shutdown_write();
    result
}

async fn send_requests(
    stream: &TcpStream,
    pipeline: &Pipeline,
    payloads: &Payloads,
    quota: Option<u64>,
    deadline: Option<Instant>,
    depth: usize,
    sent: &mut u64,
) -> io::Result<()> {
    let mut batch = FrameBatch::new();
    loop {
        let remaining = quota.map_or(u64::MAX, |q| q - *sent);
        if remaining == 0 || deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(());
        }
        let want = remaining.min(depth as u64) as usize;
        let Some(credits) = pipeline.window.acquire_up_to(want).await else {
            return Ok(());
        };
        let now = Instant::now();
        for _ in 0..credits {
            batch.push(payloads.request(*sent));
            pipeline.in_flight.borrow_mut().push_back(now);
            *sent += 1;
            if batch.is_full() {
                stream.send_all_vectored(batch.take()).await?;
            }
        }
        if !batch.is_empty() {
            stream.send_all_vectored(batch.take()).await?;
        }
    }
}

async fn read_replies(
    stream: &TcpStream,
    pipeline: &Pipeline,
    payloads: &Payloads,
    conn: usize,
) -> Result<ConnReport, LoadError> {
    let mut reader = FrameReader::new(payloads.size);
    let mut inbound = BytesMut::with_capacity(READ_CHUNK);
    let mut latency_ns = new_histogram();
    let mut received = 0u64;
    loop {
        let (res, buf) = stream.recv(inbound, READ_CHUNK).await;
        inbound = buf;
        let n = match res {
            // A server that closes with our requests unread resets the connection: that is
            // the same "closed early" as an orderly close, judged by the count below.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => 0,
            other => other.map_err(|source| LoadError::Io { conn, source })?,
        };
        if n == 0 {
            reader
                .finish()
                .map_err(|source| LoadError::Protocol { conn, source })?;
            break;
        }
        reader.received(n);
        let now = Instant::now();
        let mut replies = 0;
        while let Some(reply) = reader
            .next(&mut inbound)
            .map_err(|source| LoadError::Protocol { conn, source })?
        {
            let sent_at = pipeline
                .in_flight
                .borrow_mut()
                .pop_front()
                .ok_or(LoadError::UnexpectedReply { conn })?;
            if reply != payloads.request(received) {
                return Err(LoadError::Mismatch {
                    conn,
                    message: received,
                });
            }
            latency_ns.saturating_record(now.duration_since(sent_at).as_nanos() as u64);
            received += 1;
            replies += 1;
        }
        pipeline.window.release(replies);
    }
    let sent = pipeline.sent_total.get();
    if sent != Some(received) {
        return Err(LoadError::ClosedEarly {
            conn,
            sent,
            received,
        });
    }
    Ok(ConnReport {
        messages: received,
        latency_ns,
    })
}
