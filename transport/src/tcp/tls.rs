//! Frames over TLS: [`TlsStream`] as a [`FrameStream`], [`TlsEndpoint`] as a [`Listener`],
//! and [`TlsConnection::connect`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire_runtime::accept::ListenerHandle;
use corewire_runtime::tls::rustls::pki_types::ServerName;
use corewire_runtime::tls::{TlsAccepted, TlsConnector, TlsEndpoint, TlsStream};
use corewire_runtime::Runtime;

use super::{ConnOptions, FrameStream, TcpConnection, TlsConnection};
use crate::conn::{TransportError, TransportKind};
use crate::listen::{ConnSettings, Listener};

/// How long a closing connection waits for its close_notify to leave.
const CLOSE_NOTIFY_GRACE: Duration = Duration::from_millis(100);

impl FrameStream for TlsStream {
    const KIND: TransportKind = TransportKind::Tls;

    fn poll_recv_available(
        &self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<io::Result<usize>> {
        TlsStream::poll_recv_available(self, cx, buf)
    }

    fn send_all_vectored(&self, bufs: Vec<Bytes>) -> impl Future<Output = io::Result<()>> {
        TlsStream::send_all_vectored(self, bufs)
    }

    async fn finish(&self) {
        // close_notify, if the socket takes it promptly (a peer that stopped reading must
        // not keep the connection alive), then both directions down.
        let _ = corewire_runtime::timeout(CLOSE_NOTIFY_GRACE, self.shutdown()).await;
        let _ = self.shutdown_both();
    }

    fn shutdown_both(&self) -> io::Result<()> {
        TlsStream::shutdown_both(self)
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        TlsStream::peer_addr(self)
    }
}

impl TlsConnection {
    /// Connect to `addr` from the current shard and run the TLS handshake for `server_name`.
    pub async fn connect_tls(
        addr: SocketAddr,
        connector: &TlsConnector,
        server_name: ServerName<'static>,
        options: ConnOptions,
    ) -> Result<TlsConnection, TransportError> {
        let stream = connector.connect_addr(addr, server_name).await?;
        Ok(TcpConnection::new(stream, options))
    }
}

impl Listener for TlsEndpoint {
    type Conn = TlsConnection;
    type Error = io::Error;

    fn listen<H, Fut>(
        self,
        rt: &Runtime,
        settings: ConnSettings,
        handler: H,
    ) -> io::Result<ListenerHandle>
    where
        H: Fn(TlsConnection) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        self.serve(rt, move |accepted: TlsAccepted| {
            let options = ConnOptions::from_settings(settings, accepted.budget);
            handler(TcpConnection::new(accepted.stream, options))
        })
    }
}
