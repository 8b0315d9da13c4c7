//! [`TlsAcceptor`] and [`TlsConnector`]: a rustls configuration shared by every connection of
//! a shard and replaceable at run time (certificate reload without a restart).
//!
//! Each shard keeps its own copy of the configuration (a clone of the published one: the
//! certificate resolver, session cache and ticketer inside stay shared, so a session resumes
//! on any shard), so taking it for a new connection touches no cache line another shard
//! writes. [`TlsAcceptor::reload`] publishes a new configuration: every shard picks it up at
//! its next handshake (one atomic load per handshake tells it whether to), connections
//! already open keep the one they started with.

use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ServerConfig};

use super::stream::TlsStream;
use crate::net::TcpStream;

/// The current configuration of an acceptor or connector, and how many times it changed.
struct Published<T> {
    generation: AtomicU64,
    current: Mutex<(u64, Arc<T>)>,
}

impl<T: Clone> Published<T> {
    fn new(config: Arc<T>) -> Arc<Published<T>> {
        Arc::new(Published {
            generation: AtomicU64::new(0),
            current: Mutex::new((0, config)),
        })
    }

    fn publish(&self, config: Arc<T>) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let generation = current.0 + 1;
        *current = (generation, config);
        self.generation.store(generation, Ordering::Release);
    }

    fn latest(&self) -> (u64, Arc<T>) {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        (current.0, current.1.clone())
    }
}

/// One shard's copy of one acceptor's or connector's configuration.
struct Cached<T> {
    owner: Weak<Published<T>>,
    generation: u64,
    config: Arc<T>,
}

/// This shard's copy of `published`'s configuration, refreshed when a newer one was
/// published. Off a shard: the published one.
fn shard_copy<T: Clone>(published: &Arc<Published<T>>, cache: &RefCell<Vec<Cached<T>>>) -> Arc<T> {
    let generation = published.generation.load(Ordering::Acquire);
    let mut cache = cache.borrow_mut();
    // Copies of acceptors that are gone go with them.
    cache.retain(|c| c.owner.strong_count() > 0);
    let owner = Arc::as_ptr(published);
    if let Some(cached) = cache.iter().find(|c| c.owner.as_ptr() == owner) {
        if cached.generation == generation {
            return cached.config.clone();
        }
    }
    let (generation, latest) = published.latest();
    let config = Arc::new(T::clone(&latest));
    cache.retain(|c| c.owner.as_ptr() != owner);
    cache.push(Cached {
        owner: Arc::downgrade(published),
        generation,
        config: config.clone(),
    });
    config
}

crate::shard_local! {
    static SERVER_CONFIGS: RefCell<Vec<Cached<ServerConfig>>> = RefCell::new(Vec::new());
    static CLIENT_CONFIGS: RefCell<Vec<Cached<ClientConfig>>> = RefCell::new(Vec::new());
}

/// The server side of TLS: a [`ServerConfig`] shared by every shard, and the handshake.
/// Cheap to clone, `Send + Sync`: give it to every listener and keep one to
/// [`reload`](Self::reload) certificates.
#[derive(Clone)]
pub struct TlsAcceptor {
    published: Arc<Published<ServerConfig>>,
}

impl TlsAcceptor {
    /// An acceptor with rustls' server `config`.
    pub fn new(config: impl Into<Arc<ServerConfig>>) -> TlsAcceptor {
        TlsAcceptor {
            published: Published::new(config.into()),
        }
    }

    /// Use `config` for every connection accepted from now on, on every shard; connections
    /// already open keep theirs.
    pub fn reload(&self, config: impl Into<Arc<ServerConfig>>) {
        self.published.publish(config.into());
    }

    /// How many times the configuration was replaced.
    pub fn generation(&self) -> u64 {
        self.published.generation.load(Ordering::Acquire)
    }

    /// The configuration a connection accepted now on this shard gets (this shard's copy).
    pub fn config(&self) -> Arc<ServerConfig> {
        SERVER_CONFIGS
            .try_with(|cache| shard_copy(&self.published, cache))
            .unwrap_or_else(|| self.published.latest().1)
    }

    /// Run the server side of the handshake on `tcp` (no time limit: see
    /// [`TlsEndpoint`](super::TlsEndpoint) for one).
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<TlsStream> {
        let stream = self.start(tcp)?;
        stream.handshake().await?;
        Ok(stream)
    }

    pub(crate) fn start(&self, tcp: TcpStream) -> io::Result<TlsStream> {
        let tls = rustls::ServerConnection::new(self.config()).map_err(io::Error::other)?;
        Ok(TlsStream::new(tcp, tls.into()))
    }
}

/// The client side of TLS: a [`ClientConfig`] shared by every shard (its session cache
/// too, so a reconnect resumes on any shard), and the handshake. Cheap to clone, `Send +
/// Sync`.
#[derive(Clone)]
pub struct TlsConnector {
    published: Arc<Published<ClientConfig>>,
}

impl TlsConnector {
    /// A connector with rustls' client `config`.
    pub fn new(config: impl Into<Arc<ClientConfig>>) -> TlsConnector {
        TlsConnector {
            published: Published::new(config.into()),
        }
    }

    /// Use `config` for every connection made from now on.
    pub fn reload(&self, config: impl Into<Arc<ClientConfig>>) {
        self.published.publish(config.into());
    }

    /// The configuration a connection made now on this shard gets.
    pub fn config(&self) -> Arc<ClientConfig> {
        CLIENT_CONFIGS
            .try_with(|cache| shard_copy(&self.published, cache))
            .unwrap_or_else(|| self.published.latest().1)
    }

    /// Run the client side of the handshake on `tcp`, for `server_name` (sent as SNI when it
    /// is a DNS name, and what the server's certificate must name).
    pub async fn connect(
        &self,
        server_name: ServerName<'static>,
        tcp: TcpStream,
    ) -> io::Result<TlsStream> {
        let tls =
            rustls::ClientConnection::new(self.config(), server_name).map_err(io::Error::other)?;
        let stream = TlsStream::new(tcp, tls.into());
        stream.handshake().await?;
        Ok(stream)
    }

    /// Connect over TCP to `addr` from the current shard, then run the handshake.
    pub async fn connect_addr(
        &self,
        addr: std::net::SocketAddr,
        server_name: ServerName<'static>,
    ) -> io::Result<TlsStream> {
        let tcp = TcpStream::connect(addr).await?;
        self.connect(server_name, tcp).await
    }
}
