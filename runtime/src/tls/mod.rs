//! TLS over the shard's TCP streams, on [rustls](https://docs.rs/rustls) with its `ring`
//! crypto provider (cargo feature `tls`; a TCP-only build compiles no rustls).
//!
//! - [`TlsStream`]: a TLS 1.2/1.3 connection over a [`TcpStream`](crate::net::TcpStream),
//!   server or client side. rustls is sans-I/O: the stream feeds it the chunks its TCP
//!   stream receives (the shard's multishot receive into its buffer ring, so a waiting
//!   connection holds no receive buffer of its own) and sends what it encrypts as owned
//!   buffers on the ring. Cancel-safe and bounded both ways (see [`TlsStream`]); the
//!   poll-based adapters of [`compat`](crate::compat) (futures-io, tokio-io, hyper) are
//!   implemented on it directly, so hyper and h2 run over TLS unchanged (ALPN `h2`).
//! - [`TlsAcceptor`] / [`TlsConnector`]: the handshake with a rustls
//!   [`ServerConfig`](rustls::ServerConfig) / [`ClientConfig`](rustls::ClientConfig) that
//!   each shard keeps a copy of; `reload` publishes a new one (new certificates) to every
//!   shard for the connections that follow. ALPN, SNI, client certificates (mutual TLS with
//!   rustls's `WebPkiClientVerifier`, required or optional) and session resumption
//!   (session ids and tickets) are rustls's, configured on those configs.
//! - [`TlsEndpoint`]: a listener `serve` takes like a `TcpEndpoint`, with a handshake time
//!   limit and a bound on handshakes in progress per shard; a failed handshake (a plaintext
//!   client on the TLS port, an untrusted certificate) closes that connection with a counted,
//!   sampled log line.
//! - [`pem`]: certificates and keys from PEM files; [`provider`]: the ring provider, for
//!   building configs (`ServerConfig::builder_with_provider(tls::provider())`).
//!
//! ```no_run
//! use std::sync::Arc;
//! use corewire_runtime::tls::{self, rustls, TlsAcceptor, TlsEndpoint};
//! use corewire_runtime::Runtime;
//!
//! let certs = tls::pem::certs_from_file("server.crt").unwrap();
//! let key = tls::pem::private_key_from_file("server.key").unwrap();
//! let config = rustls::ServerConfig::builder_with_provider(tls::provider())
//!     .with_safe_default_protocol_versions()
//!     .unwrap()
//!     .with_no_client_auth()
//!     .with_single_cert(certs, key)
//!     .unwrap();
//! let acceptor = TlsAcceptor::new(config);
//! let rt = Runtime::builder().shards(2).build().unwrap();
//! let server = TlsEndpoint::bind("127.0.0.1:8443".parse().unwrap(), acceptor.clone())
//!     .serve(&rt, |conn| async move {
//!         let mut buf = bytes::BytesMut::new();
//!         while let Ok(n) = conn.stream.recv_available(&mut buf).await {
//!             if n == 0 || conn.stream.send_all(buf.split().freeze()).await.is_err() {
//!                 break;
//!             }
//!         }
//!     })
//!     .unwrap();
//! // Later, new certificates for new connections: acceptor.reload(new_config);
//! # drop(server);
//! ```

mod config;
mod endpoint;
pub mod pem;
mod stream;

use std::sync::Arc;

pub use rustls;

pub use config::{TlsAcceptor, TlsConnector};
pub use endpoint::{TlsAccepted, TlsEndpoint, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_HANDSHAKES};
pub use stream::{TlsStream, TLS_WRITE_BUFFER};

/// rustls's `ring` crypto provider, the one this crate builds rustls with.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    // rustls deprecates ring's provider for lacking post-quantum key exchange; it is the one
    // that builds without cmake and aws-lc, which is why it is used here.
    #[allow(deprecated)]
    Arc::new(rustls::crypto::ring::default_provider())
}
