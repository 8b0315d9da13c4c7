//! Client of the binary protocol over any [`Connection`] (TCP or RDMA), on
//! top of [`corewire::Client`]: many calls may be in flight at once from several tasks of the
//! client's shard, and replies are matched by correlation id.
//!
//! ```no_run
//! use corewire::{ClientOptions, Runtime};
//! use corewire_kv::kv_client::KvClient;
//!
//! let rt = Runtime::builder().shards(1).build().unwrap();
//! let addr = "127.0.0.1:7000".parse().unwrap();
//! let value = rt.run_on(0, move || async move {
//!     let kv = KvClient::connect_tcp(addr, ClientOptions::default()).await.unwrap();
//!     kv.set(b"k", b"v").await.unwrap();
//!     kv.get(b"k").await.unwrap()
//! });
//! assert_eq!(value.unwrap().as_deref(), Some(&b"v"[..]));
//! ```

pub mod bench;

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use corewire::transport::rdma::RdmaConnection;
use corewire::transport::tcp::TcpConnection;
use corewire::transport::Connection;
use corewire::{Client, ClientError, ClientOptions, Status};

use crate::binary::wire::Method;
use crate::binary::{request, response, WireError, SERVICE_ID};

/// Why a KV call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvError {
    /// The server ran the command and it failed, with Redis's error text (e.g. `ERR value is
    /// not an integer or out of range`).
    Server(String),
    /// The call did not complete: connection lost, timeout, or another RPC-level failure.
    Rpc(ClientError),
    /// The reply could not be decoded.
    Wire(WireError),
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvError::Server(message) => f.write_str(message),
            KvError::Rpc(error) => write!(f, "{error}"),
            KvError::Wire(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for KvError {}

impl From<WireError> for KvError {
    fn from(error: WireError) -> Self {
        KvError::Wire(error)
    }
}

impl From<ClientError> for KvError {
    fn from(error: ClientError) -> Self {
        match error {
            // A command that ran and failed comes back typed, with Redis's error text.
            ClientError::Status(Status::Failed(text)) => KvError::Server(text),
            other => KvError::Rpc(other),
        }
    }
}

/// A KV client on one connection, owned by the shard that made it. Clones share the
/// connection.
pub struct KvClient<C: Connection = TcpConnection> {
    client: Client<C>,
}

impl<C: Connection> Clone for KvClient<C> {
    fn clone(&self) -> Self {
        KvClient {
            client: self.client.clone(),
        }
    }
}

impl KvClient<TcpConnection> {
    /// Connects over TCP from the current shard.
    pub async fn connect_tcp(addr: SocketAddr, options: ClientOptions) -> Result<Self, KvError> {
        Ok(KvClient::new(Client::connect_tcp(addr, options).await?))
    }
}

impl KvClient<RdmaConnection> {
    /// Connects over RDMA from the current shard; the RDMA transport must be installed on the
    /// client's runtime ([`corewire::transport::rdma::install`]).
    pub async fn connect_rdma(addr: SocketAddr, options: ClientOptions) -> Result<Self, KvError> {
        Ok(KvClient::new(Client::connect_rdma(addr, options).await?))
    }
}

impl<C: Connection> KvClient<C> {
    /// Uses an RPC client of any transport.
    pub fn new(client: Client<C>) -> KvClient<C> {
        KvClient { client }
    }

    pub fn rpc(&self) -> &Client<C> {
        &self.client
    }

    async fn call(&self, method: Method, payload: Bytes) -> Result<Bytes, KvError> {
        Ok(self.client.call(SERVICE_ID, method.0, payload).await?)
    }

    /// GET: `None` if the key does not exist.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Bytes>, KvError> {
        let reply = self.call(Method::Get, request::get(key)).await?;
        Ok(response::get(&reply)?)
    }

    pub async fn set(&self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        let reply = self.call(Method::Set, request::set(key, value, 0)).await?;
        Ok(response::ok(Method::Set.0, &reply)?)
    }

    /// SET with an expiry (`PX`); a zero `ttl` means none.
    pub async fn set_with_ttl(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
    ) -> Result<(), KvError> {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let reply = self
            .call(Method::Set, request::set(key, value, ttl_ms))
            .await?;
        Ok(response::ok(Method::Set.0, &reply)?)
    }

    /// DEL: how many of `keys` existed.
    pub async fn del<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<u64, KvError> {
        let reply = self.call(Method::Del, request::del(keys)).await?;
        Ok(response::del(&reply)?)
    }

    /// MGET: one slot per key, in order.
    pub async fn mget<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>, KvError> {
        let reply = self.call(Method::MGet, request::mget(keys)).await?;
        Ok(response::mget(&reply)?)
    }

    pub async fn mset<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        entries: &[(K, V)],
    ) -> Result<(), KvError> {
        let reply = self.call(Method::MSet, request::mset(entries)).await?;
        Ok(response::ok(Method::MSet.0, &reply)?)
    }

    /// INCR: the new value.
    pub async fn incr(&self, key: &[u8]) -> Result<i64, KvError> {
        self.incr_by(key, 1).await
    }

    /// INCRBY (DECRBY with a negative `delta`): the new value.
    pub async fn incr_by(&self, key: &[u8], delta: i64) -> Result<i64, KvError> {
        let reply = self.call(Method::Incr, request::incr(key, delta)).await?;
        Ok(response::incr(&reply)?)
    }
}
