//! The KV service on the corewire service framework: one instance per shard, each call routed
//! and executed exactly like a RESP request (same shard stores, same batching to other
//! shards, same durability gate).

use std::cell::RefCell;
use std::rc::Rc;

use corewire::sync::oneshot;
use corewire::transport::Connection;
use corewire::{Request, Response, Service, Status};

use crate::binary::request::{self, RequestError};
use crate::binary::{response, WireError, SERVICE_ID};
use crate::command::Command;
use crate::reply::Reply;
use crate::server::shard::{self, Shard};
use crate::server::sink::{Merges, Part, ReplySink, SinkKey};

/// The binary-protocol service of a running server, on one shard.
pub struct KvService {
    shard: Rc<Shard>,
}

impl KvService {
    /// The instance for the current shard. Only meaningful on a shard of a running
    /// [`crate::server::RunningServer`], which is where the service framework creates it.
    pub(crate) fn for_current_shard() -> KvService {
        KvService {
            shard: shard::current(),
        }
    }

    /// Routes `command` like a RESP request and waits for its (merged) reply.
    async fn run(&self, command: Command) -> Reply {
        let (reply_tx, reply_rx) = oneshot::channel();
        let call = Rc::new(PendingCall {
            state: RefCell::new(CallState {
                merges: Merges::default(),
                reply: Some(reply_tx),
            }),
            shared_info: self.shard.shared.clone(),
        });
        let key = self.shard.register(call.clone());
        let _registered = Registered {
            shard: &self.shard,
            key,
        };
        let ready = {
            let mut state = call.state.borrow_mut();
            let now = shard::now_ms();
            self.shard.dispatch(key, 0, command, &mut state.merges, now)
        };
        if let Some(reply) = ready {
            return reply;
        }
        // The sender lives in the registered call until the merged reply is delivered; it
        // is dropped unsent only if the shard's sinks are torn down (shutdown).
        reply_rx
            .await
            .unwrap_or_else(|_| Reply::error("ERR the shard stopped before replying"))
    }
}

impl Service for KvService {
    const ID: u32 = SERVICE_ID;

    async fn call(&self, request: Request) -> Result<Response, Status> {
        let command = match request::decode(request.method, &request.payload) {
            Ok(command) => command,
            Err(RequestError::Wire(WireError::UnknownMethod(method_id))) => {
                return Err(Status::UnknownMethod {
                    service_id: SERVICE_ID,
                    method_id,
                })
            }
            Err(RequestError::Wire(error)) => return Err(Status::BadRequest(error.to_string())),
            // Well-formed, but a command Redis would refuse with this error reply.
            Err(RequestError::Command(error)) => {
                return Err(Status::Failed(
                    String::from_utf8_lossy(&error.message()).into_owned(),
                ))
            }
        };
        match self.run(command).await {
            // A Redis error (WRONGTYPE-like, not an integer, MISCONF...): the command ran and
            // failed; Redis's text travels typed as `Failed`, which the client surfaces as
            // `KvError::Server`.
            Reply::Error(message) => Err(Status::Failed(
                String::from_utf8_lossy(&message).into_owned(),
            )),
            reply => response::encode(request.method, reply)
                .map(Response::new)
                .map_err(|error| Status::Internal(error.to_string())),
        }
    }
}

/// Serves the binary protocol on `conn`, a connection of any transport accepted on a shard of
/// a running server (this is the hook an RDMA listener uses; see
/// [`crate::server::RunningServer::binary_server`]).
pub async fn serve_connection<C: Connection>(server: &corewire::Server, conn: C) {
    corewire::service::serve_connection(server, conn).await
}

struct CallState {
    merges: Merges,
    /// Taken when the merged reply is complete.
    reply: Option<oneshot::Sender<Reply>>,
}

struct PendingCall {
    state: RefCell<CallState>,
    shared_info: std::sync::Arc<crate::server::shared::ServerShared>,
}

impl ReplySink for PendingCall {
    fn deliver(&self, seq: u64, part: Part, reply: Reply) {
        let done = {
            let mut state = self.state.borrow_mut();
            let info = || self.shared_info.info();
            match state.merges.accept(seq, part, reply, info) {
                Some(reply) => state.reply.take().map(|tx| (tx, reply)),
                None => None,
            }
        };
        if let Some((tx, reply)) = done {
            // The caller may have gone (cancelled): then nobody wants the reply.
            let _ = tx.send(reply);
        }
    }
}

/// Removes the call from the shard's sinks however the call ends (also when cancelled).
struct Registered<'a> {
    shard: &'a Shard,
    key: SinkKey,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.shard.unregister(self.key);
    }
}
