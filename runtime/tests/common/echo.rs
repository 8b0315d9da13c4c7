//! A reference echo service for the tests: frames are a u32 little-endian length and that
//! many bytes, and every frame comes back unchanged. It is deliberately simple and strictly
//! sequential (read, reply, and only then read again), so its memory per connection is bounded
//! by construction: whatever the tests observe about buffering comes from the runtime and the
//! kernel, not from clever handler code.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use corewire_runtime::accept::{AcceptMode, Accepted, ListenerHandle, TcpEndpoint};
use corewire_runtime::net::TcpStream;
use corewire_runtime::{Budget, RoundBudget, Runtime};

pub const PREFIX_LEN: usize = 4;
/// Spare room asked of every recv.
pub const READ_CHUNK: usize = 64 * 1024;
/// Replies are flushed once this much is pending, so one read's replies never pile up.
pub const MAX_PENDING_REPLY: usize = 256 * 1024;

/// What the service has seen, across all its connections.
#[derive(Default, Debug)]
pub struct EchoCounters {
    pub bytes_read: AtomicU64,
    pub messages: AtomicU64,
    pub connections_ended: AtomicU64,
}

impl EchoCounters {
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::SeqCst)
    }
    pub fn messages(&self) -> u64 {
        self.messages.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
pub struct EchoConfig {
    pub max_msg: usize,
    pub counters: Arc<EchoCounters>,
}

impl EchoConfig {
    pub fn new(max_msg: usize) -> EchoConfig {
        EchoConfig {
            max_msg,
            counters: Arc::default(),
        }
    }

    /// The most a connection of this service holds in user space: a whole frame being
    /// assembled, the read that completed it, and the replies not yet handed to the kernel.
    pub fn max_buffered_per_connection(&self) -> usize {
        PREFIX_LEN + self.max_msg + READ_CHUNK + MAX_PENDING_REPLY + PREFIX_LEN + self.max_msg
    }
}

/// A running echo server and the counters of its connections.
pub struct EchoServer {
    pub handle: ListenerHandle,
    pub config: EchoConfig,
}

impl EchoServer {
    pub fn addr(&self) -> SocketAddr {
        self.handle.local_addr()
    }
}

pub fn start(rt: &Runtime, mode: AcceptMode, budget: Budget, max_msg: usize) -> EchoServer {
    let config = EchoConfig::new(max_msg);
    let cfg = config.clone();
    let handle = TcpEndpoint::bind("127.0.0.1:0".parse().unwrap())
        .mode(mode)
        .budget(budget)
        .serve(rt, move |accepted| serve_connection(accepted, cfg.clone()))
        .expect("serve");
    EchoServer { handle, config }
}

/// Length of the frame at the front of `buf`: `Ok(None)` while incomplete.
pub fn complete_frame(buf: &[u8], max_msg: usize) -> Result<Option<usize>, usize> {
    if buf.len() < PREFIX_LEN {
        return Ok(None);
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if len > max_msg {
        return Err(len);
    }
    Ok((buf.len() >= PREFIX_LEN + len).then_some(PREFIX_LEN + len))
}

/// How a connection ended.
enum End {
    /// The peer closed between frames.
    Clean,
    /// A reset or failed send: the peer is gone, nothing to report.
    PeerGone,
    /// The peer broke the framing; counted in the shard's `protocol_errors`.
    Protocol(String),
}

pub async fn serve_connection(accepted: Accepted, config: EchoConfig) {
    let Accepted { stream, budget, .. } = accepted;
    if let End::Protocol(reason) = echo_loop(&stream, budget, &config).await {
        // Counted in the shard's `protocol_errors` (and logged as a sample).
        corewire_runtime::report_protocol_error("echo", stream.peer_addr().ok(), &reason);
    }
    config
        .counters
        .connections_ended
        .fetch_add(1, Ordering::SeqCst);
}

async fn echo_loop(stream: &TcpStream, budget: Budget, config: &EchoConfig) -> End {
    let mut round = RoundBudget::new(budget);
    let mut inbound = BytesMut::with_capacity(READ_CHUNK);
    let mut replies = BytesMut::new();
    loop {
        let (res, buf) = stream.recv(inbound, READ_CHUNK).await;
        inbound = buf;
        match res {
            Ok(0) if inbound.is_empty() => return End::Clean,
            Ok(0) => {
                return End::Protocol(format!("peer closed mid-frame ({} bytes)", inbound.len()))
            }
            Ok(n) => {
                config
                    .counters
                    .bytes_read
                    .fetch_add(n as u64, Ordering::SeqCst);
            }
            Err(_) => return End::PeerGone,
        }
        loop {
            let frame_len = match complete_frame(&inbound, config.max_msg) {
                Ok(Some(n)) => n,
                Ok(None) => {
                    if inbound.len() >= PREFIX_LEN {
                        // Room for the whole frame, so a large one arrives in few reads.
                        let declared =
                            u32::from_le_bytes([inbound[0], inbound[1], inbound[2], inbound[3]])
                                as usize;
                        inbound.reserve(PREFIX_LEN + declared - inbound.len());
                    }
                    break;
                }
                Err(len) => return End::Protocol(format!("oversize frame of {len} bytes")),
            };
            let frame = inbound.split_to(frame_len);
            replies.extend_from_slice(&frame);
            config.counters.messages.fetch_add(1, Ordering::SeqCst);
            if replies.len() >= MAX_PENDING_REPLY && !send(stream, &mut replies).await {
                return End::PeerGone;
            }
            round.charge(frame_len);
            round.yield_if_exhausted().await;
        }
        if !send(stream, &mut replies).await {
            return End::PeerGone;
        }
    }
}

/// Hand the pending replies to the kernel; false when the peer is gone.
async fn send(stream: &TcpStream, replies: &mut BytesMut) -> bool {
    if replies.is_empty() {
        return true;
    }
    let out: Bytes = replies.split().freeze();
    stream.send_all(out).await.is_ok()
}
