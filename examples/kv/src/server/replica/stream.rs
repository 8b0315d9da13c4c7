//! The replica's connection to its master: plain TCP, TLS with `tls-replication yes`
//! (the master's certificate must chain to `tls-ca-cert-file`/`tls-ca-cert-dir`, its name
//! is not checked, as Redis; ours is `tls-client-cert-file` or else `tls-cert-file`, for a
//! master that authenticates its clients), or RDMA with `repl-transport rdma`.
//!
//! Over RDMA, REPLICAOF's host and port name the master's `--repl-rdma` endpoint (which an
//! operator gives the RESP port's number, so the same REPLICAOF works for either transport:
//! rdma_cm's ports are not TCP's). The RDMA transport is installed on first use; without a
//! device, or with the endpoint unreachable, the connect fails with the reason (the link
//! retries every second, as over TCP), never falling back to TCP.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use corewire::runtime::net::TcpStream;
use corewire::runtime::tls::rustls::pki_types::ServerName;
use corewire::runtime::tls::{TlsConnector, TlsStream};
use corewire::transport::rdma::{self, PollerMode, RdmaConfig};

use super::super::rdma_bytes::RdmaBytes;
use crate::config::LiveConfig;

pub(super) enum MasterStream {
    Tcp(TcpStream),
    Tls(TlsStream),
    Rdma(RdmaBytes),
}

/// How the link reaches its master (`repl-transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Transport {
    Tcp,
    Rdma,
}

impl Transport {
    /// The setting's value (`tcp` for anything else: the option table admits only the two).
    pub fn from_setting(value: Option<&str>) -> Transport {
        match value {
            Some("rdma") => Transport::Rdma,
            _ => Transport::Tcp,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Rdma => "rdma",
        }
    }
}

impl MasterStream {
    /// Connects to `addr` (named `host` in the configuration) by `repl-transport`: over
    /// TCP (and TLS when `tls` is given), or over RDMA.
    pub async fn open(
        live: &LiveConfig,
        source: Option<IpAddr>,
        addr: SocketAddr,
        host: &str,
        tls: Option<TlsConnector>,
    ) -> io::Result<MasterStream> {
        match Transport::from_setting(live.get("repl-transport").as_deref()) {
            Transport::Tcp => MasterStream::connect(source, addr, host, tls).await,
            Transport::Rdma if tls.is_some() => Err(io::Error::other(
                "tls-replication yes needs repl-transport tcp (no TLS over RDMA)",
            )),
            Transport::Rdma => {
                let poller = (live.get("rdma-poller").and_then(|v| v.parse().ok()))
                    .unwrap_or_else(PollerMode::adaptive);
                MasterStream::connect_rdma(addr, poller)
                    .await
                    .map_err(io::Error::other)
            }
        }
    }

    /// Connects to `addr` (named `host` in the configuration), over TLS when `tls` is given.
    async fn connect(
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

    /// Connects to the master's `--repl-rdma` endpoint at `addr` over RDMA, first installing
    /// the transport on this process's shards if it is not yet (with `poller`).
    async fn connect_rdma(addr: SocketAddr, poller: PollerMode) -> Result<MasterStream, String> {
        if !rdma::installed_here() {
            let mut config = RdmaConfig::default();
            config.mode = poller;
            (rdma::install_async(config).await)
                .map_err(|e| format!("RDMA transport not available: {e}"))?;
        }
        let conn = (rdma::connect(addr).await)
            .map_err(|e| format!("RDMA connect to {addr} (repl-transport rdma): {e}"))?;
        Ok(MasterStream::Rdma(RdmaBytes::new(conn)))
    }

    /// Appends what arrived to `input` (cancel-safe): the bytes appended, 0 at the end.
    pub fn poll_recv(&self, cx: &mut Context<'_>, input: &mut BytesMut) -> Poll<io::Result<usize>> {
        match self {
            MasterStream::Tcp(stream) => Pin::new(&mut stream.recv_available(input)).poll(cx),
            MasterStream::Tls(stream) => stream.poll_recv_available(cx, input),
            MasterStream::Rdma(stream) => {
                let had = input.len();
                let more = std::task::ready!(
                    stream.poll_recv(cx, |bytes| input.extend_from_slice(bytes))
                )?;
                Poll::Ready(Ok(if more { input.len() - had } else { 0 }))
            }
        }
    }

    pub async fn send_all(&self, bytes: Bytes) -> io::Result<()> {
        match self {
            MasterStream::Tcp(stream) => stream.send_all(bytes).await,
            MasterStream::Tls(stream) => stream.send_all(bytes).await,
            MasterStream::Rdma(stream) => stream.send_all(bytes).await,
        }
    }
}
