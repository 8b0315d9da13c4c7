//! TCP fallback for clients: when RDMA set-up fails (no device or transport on this host,
//! address or route unresolvable, the server unreachable or refusing), connect over TCP to a
//! configured address instead, behind the same [`Connection`] interface. Off unless the
//! caller names a fallback: [`connect`](super::connect) never falls back.

use std::cell::Cell;
use std::net::SocketAddr;

use bytes::Bytes;
use corewire_runtime::{Budget, Runtime};

use super::conn::RdmaConnection;
use super::RdmaError;
use crate::conn::{ConnStats, Connection, PayloadBuf, TransportError, TransportKind};
use crate::frame::{Frame, FrameHeader};
use crate::tcp::{ConnOptions, TcpConnection};

/// Where and how to connect over TCP when RDMA set-up fails.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct TcpFallback {
    /// Where to connect over TCP.
    pub addr: SocketAddr,
    /// The TCP connection's options.
    pub options: ConnOptions,
}

impl TcpFallback {
    /// A fallback to `addr` with default options.
    pub fn new(addr: SocketAddr) -> TcpFallback {
        TcpFallback {
            addr,
            options: ConnOptions::default(),
        }
    }
}

/// A client connection over RDMA, or over TCP after a fallback. Either way it is the one
/// [`Connection`] the caller uses; [`Connection::kind`] says which it became.
#[derive(Clone)]
#[non_exhaustive]
pub enum RdmaOrTcp {
    /// Over RDMA.
    Rdma(RdmaConnection),
    /// Over TCP, after RDMA set-up failed.
    Tcp(TcpConnection),
}

/// Why neither transport connected: RDMA's error, and TCP's when a fallback was tried.
#[derive(Debug)]
#[non_exhaustive]
pub struct FallbackError {
    /// Why RDMA failed.
    pub rdma: RdmaError,
    /// Why TCP failed, when a fallback was tried.
    pub tcp: Option<TransportError>,
}

impl std::fmt::Display for FallbackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.tcp {
            None => write!(f, "{}", self.rdma),
            Some(tcp) => write!(f, "{}; the TCP fallback failed too: {tcp}", self.rdma),
        }
    }
}

impl std::error::Error for FallbackError {
    /// RDMA's error: the one the caller asked for (TCP's, if tried, is in `tcp`).
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.rdma)
    }
}

corewire_runtime::shard_local! {
    /// Connections this shard made over TCP because RDMA set-up failed.
    static TCP_FALLBACKS: Cell<u64> = Cell::new(0);
}

/// Connect to `addr` over RDMA from the current shard; if that fails and `fallback` is given,
/// connect to `fallback.addr` over TCP instead (counted per shard in [`tcp_fallbacks`], with
/// a warning naming the RDMA error). Any set-up failure falls back, the transport not being
/// installed on this shard (no device) included; a connection that fails after it was
/// established does not. Not cancel-safe beyond what [`connect`](super::connect) is: a
/// dropped call leaves no connection behind.
pub async fn connect_or_tcp(
    addr: SocketAddr,
    fallback: Option<&TcpFallback>,
) -> Result<RdmaOrTcp, FallbackError> {
    let rdma = match super::connect(addr).await {
        Ok(conn) => return Ok(RdmaOrTcp::Rdma(conn)),
        Err(e) => e,
    };
    let Some(fallback) = fallback else {
        return Err(FallbackError { rdma, tcp: None });
    };
    tracing::warn!(
        rdma_addr = %addr,
        tcp_addr = %fallback.addr,
        error = %rdma,
        "RDMA connection set-up failed; falling back to TCP"
    );
    match TcpConnection::connect(fallback.addr, fallback.options).await {
        Ok(conn) => {
            TCP_FALLBACKS.with(|n| n.set(n.get() + 1));
            Ok(RdmaOrTcp::Tcp(conn))
        }
        Err(tcp) => Err(FallbackError {
            rdma,
            tcp: Some(tcp),
        }),
    }
}

/// Each shard's count of connections made over TCP after RDMA set-up failed (works whether
/// or not the RDMA transport is installed).
///
/// # Panics
/// On a shard thread, where it would block the shard: await [`tcp_fallbacks_async`] there.
#[track_caller]
pub fn tcp_fallbacks(rt: &Runtime) -> Vec<u64> {
    corewire_runtime::assert_can_block("rdma::tcp_fallbacks");
    rt.spawn_on_all(|_| async { TCP_FALLBACKS.with(Cell::get) })
        .into_iter()
        .map(|h| h.wait().unwrap_or_default())
        .collect()
}

/// [`tcp_fallbacks`] from a shard: each shard's count, in shard order. Panics off a shard.
pub async fn tcp_fallbacks_async() -> Vec<u64> {
    let mut all = Vec::with_capacity(corewire_runtime::shard_count());
    for shard in 0..corewire_runtime::shard_count() {
        let n = corewire_runtime::submit_to(shard, || async { TCP_FALLBACKS.with(Cell::get) });
        all.push(n.await.unwrap_or_default());
    }
    all
}

impl Connection for RdmaOrTcp {
    async fn send(
        &self,
        header: &FrameHeader,
        payload: Bytes,
        attachment: Bytes,
    ) -> Result<(), TransportError> {
        match self {
            RdmaOrTcp::Rdma(c) => c.send(header, payload, attachment).await,
            RdmaOrTcp::Tcp(c) => c.send(header, payload, attachment).await,
        }
    }

    fn try_send_with(
        &self,
        header: &FrameHeader,
        payload_len: usize,
        attachment: &[u8],
        write: impl FnOnce(&mut PayloadBuf<'_>),
    ) -> Result<bool, TransportError> {
        match self {
            RdmaOrTcp::Rdma(c) => c.try_send_with(header, payload_len, attachment, write),
            RdmaOrTcp::Tcp(c) => c.try_send_with(header, payload_len, attachment, write),
        }
    }

    async fn ready_to_send(&self) -> Result<(), TransportError> {
        match self {
            RdmaOrTcp::Rdma(c) => c.ready_to_send().await,
            RdmaOrTcp::Tcp(c) => c.ready_to_send().await,
        }
    }

    /// Cancel-safe as both transports' `recv` is.
    async fn recv(&self) -> Result<Option<Frame>, TransportError> {
        match self {
            RdmaOrTcp::Rdma(c) => c.recv().await,
            RdmaOrTcp::Tcp(c) => c.recv().await,
        }
    }

    fn close(&self) {
        match self {
            RdmaOrTcp::Rdma(c) => c.close(),
            RdmaOrTcp::Tcp(c) => c.close(),
        }
    }

    fn is_closed(&self) -> bool {
        match self {
            RdmaOrTcp::Rdma(c) => c.is_closed(),
            RdmaOrTcp::Tcp(c) => c.is_closed(),
        }
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        match self {
            RdmaOrTcp::Rdma(c) => c.peer_addr(),
            RdmaOrTcp::Tcp(c) => c.peer_addr(),
        }
    }

    fn kind(&self) -> TransportKind {
        match self {
            RdmaOrTcp::Rdma(c) => c.kind(),
            RdmaOrTcp::Tcp(c) => c.kind(),
        }
    }

    fn budget(&self) -> Budget {
        match self {
            RdmaOrTcp::Rdma(c) => c.budget(),
            RdmaOrTcp::Tcp(c) => c.budget(),
        }
    }

    fn arrived_at(&self) -> u64 {
        match self {
            RdmaOrTcp::Rdma(c) => c.arrived_at(),
            RdmaOrTcp::Tcp(c) => c.arrived_at(),
        }
    }

    fn stats(&self) -> ConnStats {
        match self {
            RdmaOrTcp::Rdma(c) => c.stats(),
            RdmaOrTcp::Tcp(c) => c.stats(),
        }
    }
}
