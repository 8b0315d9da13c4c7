//! [`TlsEndpoint`]: a [`TcpEndpoint`] whose connections reach their handler after a TLS
//! handshake, bounded in time and in number per shard.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::config::TlsAcceptor;
use super::stream::TlsStream;
use crate::accept::{Accepted, ListenerHandle, TcpEndpoint};
use crate::coop::Budget;
use crate::net::TcpStream;
use crate::report_protocol_error;
use crate::shard::ShardId;
use crate::sync::Semaphore;

/// Default [`TlsEndpoint::handshake_timeout`].
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`TlsEndpoint::max_handshakes`].
pub const DEFAULT_MAX_HANDSHAKES: usize = 256;

/// How long a failed handshake's alert may take to leave before the connection closes.
const ALERT_GRACE: Duration = Duration::from_millis(100);

/// A TLS connection as its handler receives it, handshake done, on the shard that owns it.
#[non_exhaustive]
pub struct TlsAccepted {
    /// The connection, after its handshake.
    pub stream: TlsStream,
    /// The peer's address, when known.
    pub peer: Option<SocketAddr>,
    /// The fairness budget configured for this listener.
    pub budget: Budget,
    /// The shard the connection runs on.
    pub shard: ShardId,
}

/// Configures a sharded TLS server: the TCP side as a [`TcpEndpoint`] (address, accept mode,
/// budget, backlog), plus the [`TlsAcceptor`] (whose configuration can be reloaded while
/// serving), a handshake time limit and a bound on handshakes in progress per shard.
///
/// A connection whose handshake fails (a plaintext client, an untrusted or expired
/// certificate, a protocol mismatch) or does not finish in time is closed, counted in the
/// shard's `protocol_errors` and logged as a sample ([`report_protocol_error`], protocol
/// `"tls"`). Past `max_handshakes` on a shard, new connections wait for a handshake slot
/// (within their time limit) before any TLS state is made for them.
pub struct TlsEndpoint {
    tcp: TcpEndpoint,
    acceptor: TlsAcceptor,
    handshake_timeout: Duration,
    max_handshakes: usize,
}

impl TlsEndpoint {
    /// TLS over the connections of `tcp`, each handshaken by `acceptor`.
    pub fn new(tcp: TcpEndpoint, acceptor: TlsAcceptor) -> TlsEndpoint {
        TlsEndpoint {
            tcp,
            acceptor,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
        }
    }

    /// [`TcpEndpoint::bind`] with its defaults.
    pub fn bind(addr: SocketAddr, acceptor: TlsAcceptor) -> TlsEndpoint {
        TlsEndpoint::new(TcpEndpoint::bind(addr), acceptor)
    }

    /// How long a connection has from its accept to the end of its handshake (default 10 s).
    pub fn handshake_timeout(mut self, limit: Duration) -> Self {
        self.handshake_timeout = limit;
        self
    }

    /// Handshakes in progress at once on one shard (default 256, at least 1).
    pub fn max_handshakes(mut self, n: usize) -> Self {
        self.max_handshakes = n.max(1);
        self
    }

    /// The acceptor (keep a clone to reload certificates).
    pub fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }

    /// Start listening and serving on `rt`'s shards: `handler` runs once per connection
    /// whose handshake succeeded, as a task on the shard that owns the connection.
    pub fn serve<H, Fut>(self, rt: &crate::Runtime, handler: H) -> io::Result<ListenerHandle>
    where
        H: Fn(TlsAccepted) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let gate = Arc::new(GateKey {
            permits: self.max_handshakes,
        });
        let acceptor = self.acceptor;
        let limit = self.handshake_timeout;
        self.tcp.serve(rt, move |accepted: Accepted| {
            let (acceptor, gate, handler) = (acceptor.clone(), gate.clone(), handler.clone());
            async move {
                let Accepted {
                    stream,
                    peer,
                    budget,
                    shard,
                } = accepted;
                if let Some(stream) = handshake(&acceptor, &gate, limit, stream, peer).await {
                    handler(TlsAccepted {
                        stream,
                        peer,
                        budget,
                        shard,
                    })
                    .await
                }
            }
        })
    }
}

/// Names one listener's handshake slots on every shard.
struct GateKey {
    permits: usize,
}

crate::shard_local! {
    /// Each listener's handshake slots on this shard, by listener (gone with it).
    static GATES: RefCell<Vec<(Weak<GateKey>, Rc<Semaphore>)>> = RefCell::new(Vec::new());
}

fn gate_here(key: &Arc<GateKey>) -> Rc<Semaphore> {
    GATES.with(|gates| {
        let mut gates = gates.borrow_mut();
        gates.retain(|(k, _)| k.strong_count() > 0);
        let ptr = Arc::as_ptr(key);
        if let Some((_, sem)) = gates.iter().find(|(k, _)| k.as_ptr() == ptr) {
            return sem.clone();
        }
        let sem = Rc::new(Semaphore::new(key.permits));
        gates.push((Arc::downgrade(key), sem.clone()));
        sem
    })
}

/// The server side of the handshake within `limit` of now, holding one of the shard's
/// handshake slots; `None` (reported) when it failed.
async fn handshake(
    acceptor: &TlsAcceptor,
    gate: &Arc<GateKey>,
    limit: Duration,
    tcp: TcpStream,
    peer: Option<SocketAddr>,
) -> Option<TlsStream> {
    let deadline = Instant::now() + limit;
    let slots = gate_here(gate);
    let _permit = match crate::timeout(limit, slots.acquire(1)).await {
        Ok(Ok(permit)) => permit,
        Ok(Err(_)) => return None,
        Err(_) => {
            report_protocol_error("tls", peer, &"no handshake slot within the time limit");
            return None;
        }
    };
    let stream = match acceptor.start(tcp) {
        Ok(stream) => stream,
        Err(error) => {
            tracing::error!(%error, "cannot start a TLS connection");
            return None;
        }
    };
    let left = deadline.saturating_duration_since(Instant::now());
    match crate::timeout(left, stream.handshake()).await {
        Ok(Ok(())) => Some(stream),
        Ok(Err(error)) => {
            report_protocol_error("tls", peer, &format_args!("handshake failed: {error}"));
            // The alert rustls queued tells the peer why, if it goes out promptly.
            let _ = crate::timeout(ALERT_GRACE, stream.flush()).await;
            None
        }
        Err(_) => {
            report_protocol_error("tls", peer, &"handshake timed out");
            None
        }
    }
}
