//! The replica's connection to its master: plain TCP, or TLS with `tls-replication yes`
//! (the master's certificate must chain to `tls-ca-cert-file`/`tls-ca-cert-dir`, its name
//! is not checked, as Redis; ours is `tls-client-cert-file` or else `tls-cert-file`, for a
//! master that authenticates its clients).

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use corewire::runtime::net::TcpStream;
use corewire::runtime::tls::rustls::pki_types::ServerName;
use corewire::runtime::tls::{TlsConnector, TlsStream};

pub(super) enum MasterStream {
    Tcp(TcpStream),
    Tls(TlsStream),
}

impl MasterStream {
    /// Connects to `addr` (named `host` in the configuration), over TLS when `tls` is given.
    pub async fn connect(
        source: Option<IpAddr>,
        addr: SocketAddr,
        host: &str,
        tls: Option<TlsConnector>,
    ) -> io::Result<MasterStream> {
        let tcp = TcpStream::connect_from(source, addr).await?;
        let Some(connector) = tls else {
            return Ok(MasterStream::Tcp(tcp));
        };
        // SNI carries the configured host name when it is one; the certificate's names are
        // not checked (see `server/tls.rs`).
        let name = ServerName::try_from(host.to_owned())
            .unwrap_or_else(|_| ServerName::IpAddress(addr.ip().into()));
        Ok(MasterStream::Tls(connector.connect(name, tcp).await?))
    }

    /// Appends what arrived to `input` (cancel-safe): the bytes appended, 0 at the end.
    pub fn poll_recv(&self, cx: &mut Context<'_>, input: &mut BytesMut) -> Poll<io::Result<usize>> {
        match self {
            MasterStream::Tcp(stream) => Pin::new(&mut stream.recv_available(input)).poll(cx),
            MasterStream::Tls(stream) => stream.poll_recv_available(cx, input),
        }
    }

    pub async fn send_all(&self, bytes: Bytes) -> io::Result<()> {
        match self {
            MasterStream::Tcp(stream) => stream.send_all(bytes).await,
            MasterStream::Tls(stream) => stream.send_all(bytes).await,
        }
    }
}
