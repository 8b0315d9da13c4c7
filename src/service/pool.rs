//! A small per-shard pool of client connections to one address.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;

use super::{Client, ClientError, ClientOptions};

/// Clients to one server, owned by one shard: calls spread round-robin over `size`
/// connections, and a connection that died is replaced on next use.
pub struct ClientPool {
    addr: SocketAddr,
    options: ClientOptions,
    clients: RefCell<Vec<Option<Client>>>,
    next: Cell<usize>,
}

impl ClientPool {
    /// `size` clients to `addr`, connected on first use, with `options`.
    pub fn new(addr: SocketAddr, size: usize, options: ClientOptions) -> ClientPool {
        ClientPool {
            addr,
            options,
            clients: RefCell::new(vec![None; size.max(1)]),
            next: Cell::new(0),
        }
    }

    /// A live client (connecting or reconnecting as needed).
    pub async fn get(&self) -> Result<Client, ClientError> {
        let n = self.clients.borrow().len();
        let i = self.next.get() % n;
        self.next.set(i + 1);
        let existing = self.clients.borrow()[i].clone();
        if let Some(c) = existing {
            if !c.is_closed() {
                return Ok(c);
            }
        }
        let c = Client::connect_tcp(self.addr, self.options).await?;
        self.clients.borrow_mut()[i] = Some(c.clone());
        Ok(c)
    }

    /// Live connections in the pool.
    pub fn live(&self) -> usize {
        self.clients
            .borrow()
            .iter()
            .filter(|c| c.as_ref().is_some_and(|c| !c.is_closed()))
            .count()
    }
}
