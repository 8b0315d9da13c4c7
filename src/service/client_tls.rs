//! [`Client::connect_tls`]: the RPC client over TLS (feature `tls`).

use std::net::SocketAddr;

use corewire_runtime::tls::rustls::pki_types::ServerName;
use corewire_runtime::tls::TlsConnector;
use corewire_transport::tcp::{ConnOptions, TlsConnection};

use super::{Client, ClientError, ClientOptions};

impl Client<TlsConnection> {
    /// Connect over TCP from the current shard and run the TLS handshake with `connector`'s
    /// configuration (its roots, client certificate, ALPN, session cache) for `server_name`,
    /// which the server's certificate must name (and which is sent as SNI when it is a DNS
    /// name). The server side is a [`TlsEndpoint`](corewire_runtime::tls::TlsEndpoint).
    pub async fn connect_tls(
        addr: SocketAddr,
        connector: &TlsConnector,
        server_name: ServerName<'static>,
        options: ClientOptions,
    ) -> Result<Self, ClientError> {
        let conn = TlsConnection::connect_tls(addr, connector, server_name, {
            let mut o = ConnOptions::default();
            o.limits = options.limits;
            o
        })
        .await
        .map_err(ClientError::disconnected)?;
        Ok(Client::new(conn, options))
    }
}
