//! A connection to another node — a cluster bus link or MIGRATE's connection to its target —
//! over TCP, or over TLS with `tls-cluster yes` (the peer's certificate must chain to the
//! CA; see `server/tls.rs`).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use corewire::runtime::net::TcpStream;
use corewire::runtime::tls::rustls::pki_types::ServerName;
use corewire::runtime::tls::TlsStream;

use crate::server::tls::KvTls;

pub(super) enum PeerStream {
    Tcp(TcpStream),
    Tls(TlsStream),
}

/// The cluster's TLS, when `tls-cluster yes`.
pub(super) fn cluster_tls() -> Option<Arc<KvTls>> {
    crate::server::shard::current()
        .shared
        .tls
        .clone()
        .filter(|tls| tls.cluster_connector().is_some())
}

impl PeerStream {
    /// Connect to `target` from this shard, with TLS when the cluster uses it.
    pub async fn connect(target: SocketAddr) -> io::Result<PeerStream> {
        let tcp = TcpStream::connect(target).await?;
        match cluster_tls().and_then(|tls| tls.cluster_connector()) {
            None => Ok(PeerStream::Tcp(tcp)),
            Some(connector) => {
                let name = ServerName::IpAddress(target.ip().into());
                Ok(PeerStream::Tls(connector.connect(name, tcp).await?))
            }
        }
    }

    /// Append what arrived to `buf`: the bytes appended, 0 once the peer closed.
    pub async fn read_into(&self, buf: &mut BytesMut) -> io::Result<usize> {
        match self {
            PeerStream::Tcp(stream) => {
                let (result, back) = stream.recv(std::mem::take(buf), 4096).await;
                *buf = back;
                result
            }
            PeerStream::Tls(stream) => stream.recv_available(buf).await,
        }
    }

    pub async fn send_all(&self, bytes: Bytes) -> io::Result<()> {
        match self {
            PeerStream::Tcp(stream) => stream.send_all(bytes).await,
            PeerStream::Tls(stream) => stream.send_all(bytes).await,
        }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            PeerStream::Tcp(stream) => stream.local_addr(),
            PeerStream::Tls(stream) => stream.local_addr(),
        }
    }
}
