//! Server streaming on corewire's framing: the handler's side ([`Replies`]) and the caller's
//! ([`ReplyStream`]).
//!
//! A streamed reply is a run of StreamItem frames ended by the call's Response (or Error).
//! Buffering is bounded at every step: the handler's [`Replies::send`] waits for the one
//! reply it may have outstanding to be taken; the server sends a message only against credit
//! ([`SendCredit`](corewire_transport::rpc::SendCredit)); the client buffers at most a
//! window of messages per stream and grants credit only for the messages its reader took.
//! A reader that stops reading stops the handler; nothing grows.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use bytes::Bytes;
use corewire_runtime::sync::{mpsc, Notify};
use corewire_transport::frame::{FrameHeader, FrameKind};
use corewire_transport::rpc::{credit_payload, ReceiveCredit, SendCredit, STREAM_WINDOW};
use corewire_transport::Connection;

use super::client::{forget_call, Client, ClientError};
use super::{Response, Status};

/// Where a server-streaming handler sends its replies. Dropping it (or returning) ends the
/// stream once the replies sent are delivered.
#[derive(Debug)]
pub struct Replies {
    tx: mpsc::Sender<Response>,
}

impl Replies {
    /// A handler's end and the transport's end. One reply at a time waits between them: the
    /// transport takes it only when the caller can take it (credit on corewire's framing,
    /// HTTP/2's window on gRPC).
    pub(crate) fn channel() -> (Replies, mpsc::Receiver<Response>) {
        let (tx, rx) = mpsc::channel(1);
        (Replies { tx }, rx)
    }

    /// Send one reply. Waits while the caller is not taking replies; `Err(Cancelled)` once
    /// the call is over for the caller (cancelled, deadline passed, connection gone): stop
    /// then.
    pub async fn send(&self, reply: Response) -> Result<(), Status> {
        self.tx.send(reply).await.map_err(|_| Status::Cancelled)
    }

    /// Whether the caller is gone (a send would fail).
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The server's credit for one stream, fed by the client's Credit frames.
#[derive(Debug, Default)]
pub(crate) struct CreditGate {
    credit: RefCell<SendCredit>,
    granted: Notify,
}

impl CreditGate {
    /// Take the credit for one message, waiting for a grant when there is none.
    pub(crate) async fn take_one(&self) {
        while !self.credit.borrow_mut().sent() {
            self.granted.notified().await;
        }
    }

    /// A Credit frame's grant; `Err` (the peer broke the protocol) past the window.
    pub(crate) fn grant(&self, n: u32) -> Result<(), corewire_transport::rpc::CreditError> {
        self.credit.borrow_mut().grant(n)?;
        self.granted.notify_one();
        Ok(())
    }
}

/// The client's buffer of one stream: filled by the connection's reader, emptied by the
/// [`ReplyStream`].
#[derive(Debug, Default)]
pub(crate) struct StreamInbox {
    items: RefCell<VecDeque<Response>>,
    end: RefCell<Option<Result<(), ClientError>>>,
    changed: Notify,
}

/// The server sent more than its credit allowed.
#[derive(Debug)]
pub(crate) struct Overrun;

impl StreamInbox {
    /// A message arrived; `Err` when the stream holds a window already (the server ignored
    /// its credit: a protocol error).
    pub(crate) fn push(&self, item: Response) -> Result<(), Overrun> {
        let mut items = self.items.borrow_mut();
        if items.len() >= STREAM_WINDOW as usize {
            return Err(Overrun);
        }
        items.push_back(item);
        drop(items);
        self.changed.notify_one();
        Ok(())
    }

    /// The stream ended (its Response or Error, a timeout, the connection).
    pub(crate) fn finish(&self, result: Result<(), ClientError>) {
        self.end.borrow_mut().get_or_insert(result);
        self.changed.notify_one();
    }
}

/// The replies of a server-streaming call ([`Client::call_streaming`]). Dropping it before
/// the end cancels the call on the server.
pub struct ReplyStream<C: Connection> {
    pub(crate) client: Client<C>,
    pub(crate) id: Cell<Option<u64>>,
    pub(crate) service: u32,
    pub(crate) method: u32,
    pub(crate) inbox: Rc<StreamInbox>,
    pub(crate) credit: ReceiveCredit,
    /// Credit earned by replies taken and not yet sent to the server.
    pub(crate) owed: u32,
}

impl<C: Connection> ReplyStream<C> {
    /// The next reply; `Ok(None)` at the end of a stream that ended well. Cancel-safe: a
    /// dropped `message` future loses no reply.
    pub async fn message(&mut self) -> Result<Option<Response>, ClientError> {
        // Credit first, so a reader that waits for more has told the server it may send.
        if self.owed > 0 && self.id.get().is_some() {
            let id = self.id.get().unwrap_or_default();
            let header = FrameHeader {
                kind: FrameKind::Credit,
                ..FrameHeader::request(self.service, self.method, id)
            };
            let conn = self.client.connection();
            // A failed send means the connection is gone; the reader ends the stream.
            let _ = conn
                .send(&header, credit_payload(self.owed), Bytes::new())
                .await;
            self.owed = 0;
        }
        loop {
            let item = self.inbox.items.borrow_mut().pop_front();
            if let Some(item) = item {
                if let Some(n) = self.credit.took() {
                    self.owed += n;
                }
                return Ok(Some(item));
            }
            if let Some(end) = self.inbox.end.borrow().clone() {
                // Over for the server too: nothing to cancel on drop.
                self.id.set(None);
                return end.map(|()| None);
            }
            self.inbox.changed.notified().await;
        }
    }
}

impl<C: Connection> Drop for ReplyStream<C> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            if self.inbox.end.borrow().is_none() {
                forget_call(&self.client, id, self.service, self.method);
            }
        }
    }
}
