//! The plaintext RESP listener: started with the server and moved while it runs by
//! CONFIG SET port, as Redis's `changeListenPort` does: the new port listens before the old
//! one closes, connections already open stay, and a port that cannot be listened on changes
//! nothing.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, MutexGuard};

use corewire::runtime::accept::{AcceptMode, ListenerHandle, TcpEndpoint};
use corewire::runtime::{spawn_local, Budget, Runtime};

use super::{resp_conn, shard};

/// Where the plaintext port listens now, and how a new one is set up.
pub(crate) struct RespListener {
    mode: AcceptMode,
    budget: Budget,
    state: Mutex<State>,
}

struct State {
    /// `None`: no addresses (`bind ""`), nothing listens.
    bind: Option<IpAddr>,
    /// 0: plaintext off.
    port: u16,
    listener: Option<ListenerHandle>,
}

impl RespListener {
    pub fn new(bind: IpAddr, mode: AcceptMode, budget: Budget) -> RespListener {
        RespListener {
            mode,
            budget,
            state: Mutex::new(State {
                bind: Some(bind),
                port: 0,
                listener: None,
            }),
        }
    }

    fn endpoint(&self, addr: SocketAddr) -> TcpEndpoint {
        TcpEndpoint::bind(addr)
            .mode(self.mode.clone())
            .budget(self.budget)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Listens at `port` (0: any free port) when the server starts, off the shards.
    pub fn start(&self, rt: &Runtime, port: u16) -> io::Result<SocketAddr> {
        let mut state = self.state();
        let bind = state.bind.unwrap_or(IpAddr::from([127, 0, 0, 1]));
        let listener = self
            .endpoint(SocketAddr::new(bind, port))
            .serve(rt, |accepted| resp_conn::serve(accepted, shard::current()))?;
        let addr = listener.local_addr();
        state.port = addr.port();
        state.listener = Some(listener);
        Ok(addr)
    }

    /// The address listened on now; `None` while plaintext is off.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.state()
            .listener
            .as_ref()
            .map(ListenerHandle::local_addr)
    }

    /// The listener, for the owner to stop it at shutdown.
    pub fn take(&self) -> Option<ListenerHandle> {
        self.state().listener.take()
    }

    /// CONFIG SET port and bind, on a shard: listen at the new address (`bind` `Some(None)`:
    /// no address; `port` 0: plaintext off), then close the old listener. Nothing changes
    /// when the new one cannot listen. Returns the port now configured.
    pub fn move_to(&self, bind: Option<Option<IpAddr>>, port: Option<u16>) -> io::Result<u16> {
        let mut state = self.state();
        let bind = bind.unwrap_or(state.bind);
        let port = port.unwrap_or(state.port);
        let listening = state.listener.is_some();
        if bind == state.bind && port == state.port && (listening || bind.is_none() || port == 0) {
            return Ok(port);
        }
        let moved = match (bind, port) {
            (Some(ip), port) if port != 0 => Some(
                self.endpoint(SocketAddr::new(ip, port))
                    .serve_from_shard(|accepted| resp_conn::serve(accepted, shard::current()))?,
            ),
            _ => None,
        };
        let old = std::mem::replace(&mut state.listener, moved);
        (state.bind, state.port) = (bind, port);
        drop(state);
        if let Some(old) = old {
            spawn_local(old.stop_async());
        }
        Ok(port)
    }
}
