//! The plaintext RESP listeners: one per `bind` address at the port (and the Unix socket,
//! `unixsocket`), started with the server and moved while it runs by CONFIG SET port and
//! bind, as Redis's `changeListenPort` and `changeBindAddr` do: connections already open
//! stay, and a CONFIG SET that cannot listen at every address it asks for changes nothing.
//!
//! Redis closes its listeners, binds the new addresses, and binds the old ones again when
//! that fails. Here an address that stays keeps its listener and the new ones are bound
//! before the old ones close, so a failure leaves the old listeners as they were. Only when
//! a new address collides with an old one on the same port (`127.0.0.1` to `*`, say) are the
//! old ones closed first, Redis's way, and bound again if the new ones still fail.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use corewire::runtime::accept::{AcceptMode, ListenerHandle, TcpEndpoint};
use corewire::runtime::net::UnixListener;
use corewire::runtime::{Budget, Runtime};

use super::resp_io::{Plain, RespAccepted, RespStream};
use super::{resp_conn, shard};
use crate::config::bind::BindAddr;

/// Where the plaintext port listens now, and how a new one is set up.
pub(crate) struct RespListener {
    mode: AcceptMode,
    budget: Budget,
    state: Mutex<State>,
}

struct State {
    /// `bind`'s addresses; none: nothing listens.
    bind: Vec<BindAddr>,
    /// 0: plaintext off.
    port: u16,
    /// One per address listened at, in `bind`'s order (optional addresses the host lacks
    /// have none).
    listeners: Vec<ListenerHandle>,
}

impl RespListener {
    pub fn new(bind: Vec<BindAddr>, mode: AcceptMode, budget: Budget) -> RespListener {
        RespListener {
            mode,
            budget,
            state: Mutex::new(State {
                bind,
                port: 0,
                listeners: Vec::new(),
            }),
        }
    }

    fn endpoint(&self, addr: SocketAddr) -> TcpEndpoint {
        // IPv6 only on an IPv6 address, as Redis: `*` and `::*` share the port.
        TcpEndpoint::bind(addr)
            .mode(self.mode.clone())
            .budget(self.budget)
            .only_v6(true)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Listens at `port` (0: any free port, the same at every address) when the server
    /// starts, off the shards. Returns the port (0 when `bind` has no address).
    pub fn start(&self, rt: &Runtime, port: u16) -> io::Result<u16> {
        let mut state = self.state();
        let open = |addr| {
            self.endpoint(addr)
                .serve(rt, |accepted| resp_conn::serve(accepted, shard::current()))
        };
        let (listeners, _, port) =
            listen(&state.bind, port, Vec::new(), open).map_err(|(error, _)| error)?;
        state.port = port;
        state.listeners = listeners;
        Ok(port)
    }

    /// The first address listened at now; `None` while plaintext is off or has no address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        (self.state().listeners.first()).map(ListenerHandle::local_addr)
    }

    /// The listeners, for the owner to stop them at shutdown.
    pub fn take(&self) -> Vec<ListenerHandle> {
        std::mem::take(&mut self.state().listeners)
    }

    /// CONFIG SET port and bind, on a shard: listen at the new addresses (`bind` empty: at
    /// none; `port` 0: plaintext off), then close the listeners of addresses that go. Nothing
    /// changes when one that is not optional cannot be listened at. Returns the port now
    /// configured.
    pub fn move_to(&self, bind: Option<Vec<BindAddr>>, port: Option<u16>) -> io::Result<u16> {
        let mut state = self.state();
        let bind = bind.unwrap_or_else(|| state.bind.clone());
        let port = port.unwrap_or(state.port);
        if bind == state.bind && port == state.port {
            return Ok(port);
        }
        let open = |addr| {
            self.endpoint(addr)
                .serve_from_shard(|accepted| resp_conn::serve(accepted, shard::current()))
        };
        let old = std::mem::take(&mut state.listeners);
        let attempt = match port {
            0 => Ok((Vec::new(), old, 0)),
            port => listen(&bind, port, old, open),
        };
        let (listeners, gone) = match attempt {
            Ok((listeners, gone, _)) => (listeners, gone),
            Err((error, old)) if error.kind() == io::ErrorKind::AddrInUse && !old.is_empty() => {
                // Perhaps in use by the listeners that are to go: Redis's order.
                let addrs: Vec<SocketAddr> = old.iter().map(ListenerHandle::local_addr).collect();
                close(old);
                match listen(&bind, port, Vec::new(), open) {
                    Ok((listeners, _, _)) => (listeners, Vec::new()),
                    Err((error, _)) => {
                        state.listeners = (addrs.into_iter())
                            .filter_map(|addr| {
                                open(addr)
                                    .inspect_err(|error| {
                                        tracing::error!(%error, %addr, "cannot listen again")
                                    })
                                    .ok()
                            })
                            .collect();
                        return Err(error);
                    }
                }
            }
            Err((error, old)) => {
                state.listeners = old;
                return Err(error);
            }
        };
        close(gone);
        (state.bind, state.port, state.listeners) = (bind, port, listeners);
        Ok(port)
    }
}

/// Listens at each of `bind`'s addresses at `port` (0: the first bind picks a port, the rest
/// share it), taking over the listener in `old` of an address that stays. Returns the
/// listeners, those of `old` no address took, and the port; or the error with `old` intact
/// (what this opened closed again).
#[allow(clippy::type_complexity)]
fn listen(
    bind: &[BindAddr],
    mut port: u16,
    mut old: Vec<ListenerHandle>,
    open: impl Fn(SocketAddr) -> io::Result<ListenerHandle>,
) -> Result<(Vec<ListenerHandle>, Vec<ListenerHandle>, u16), (io::Error, Vec<ListenerHandle>)> {
    let mut listeners: Vec<(bool, ListenerHandle)> = Vec::with_capacity(bind.len());
    for address in bind {
        let addr = SocketAddr::new(address.ip, port);
        if port != 0 {
            if let Some(at) = old.iter().position(|l| l.local_addr() == addr) {
                listeners.push((false, old.remove(at)));
                continue;
            }
        }
        match open(addr) {
            Ok(listener) => {
                port = listener.local_addr().port();
                listeners.push((true, listener));
            }
            Err(error) if skipped(&error, address.optional) => {
                tracing::warn!(%error, %addr, "not listening at this address");
            }
            Err(error) => {
                tracing::warn!(%error, %addr, "cannot listen at this address");
                for (opened, listener) in listeners {
                    match opened {
                        true => listener.close_now(),
                        false => old.push(listener),
                    }
                }
                return Err((error, old));
            }
        }
    }
    Ok((listeners.into_iter().map(|(_, l)| l).collect(), old, port))
}

/// Redis's `listenToPort` goes on past an optional address the host does not have, and past
/// an address family the host does not support (IPv6 off).
fn skipped(error: &io::Error, optional: bool) -> bool {
    let unsupported = [
        libc::EAFNOSUPPORT,
        libc::EPFNOSUPPORT,
        libc::EPROTONOSUPPORT,
        libc::ESOCKTNOSUPPORT,
        libc::ENOPROTOOPT,
    ];
    (optional && error.kind() == io::ErrorKind::AddrNotAvailable)
        || error
            .raw_os_error()
            .is_some_and(|e| unsupported.contains(&e))
}

/// Stops `listeners` at once (their addresses free before this returns); their accept loops
/// end on their shards.
fn close(listeners: Vec<ListenerHandle>) {
    for listener in listeners {
        listener.close_now();
    }
}

/// The Unix socket (`unixsocket`): bound when the server starts (a socket file left by an
/// earlier run is replaced, as Redis does), with `unixsocketperm`'s permissions; shard 0
/// accepts and serves its clients. The file goes when this is dropped.
pub(crate) struct UnixSocket {
    path: PathBuf,
}

impl UnixSocket {
    pub fn start(rt: &Runtime, path: &Path, perm: u32, budget: Budget) -> io::Result<UnixSocket> {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::remove_file(path) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
        let listener = std::os::unix::net::UnixListener::bind(path)?;
        let socket = UnixSocket {
            path: path.to_owned(),
        };
        if perm != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
        }
        listener.set_nonblocking(true)?;
        rt.spawn_on(0, move || {
            accept_unix(UnixListener::from_std(listener), budget)
        });
        Ok(socket)
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn accept_unix(listener: UnixListener, budget: Budget) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                let accepted = RespAccepted {
                    stream: RespStream::Plain(Plain::Unix(Box::new(stream))),
                    peer: None,
                    budget,
                };
                corewire::runtime::spawn_local(resp_conn::serve(accepted, shard::current()));
            }
            Err(error) => {
                // EMFILE and friends: back off instead of spinning on the error.
                tracing::warn!(%error, "unix socket accept failed");
                corewire::runtime::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}
