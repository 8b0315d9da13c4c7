//! [`ReplyTo`]: where a call answered in [`Service::call_now`](super::Service::call_now) may
//! write its reply straight into the connection's send buffer.

use std::cell::Cell;
use std::fmt;

use corewire_transport::frame::FrameHeader;
use corewire_transport::rpc::response_header;
use corewire_transport::{Connection, PayloadBuf};

/// Where a reply answered in [`Service::call_now`](super::Service::call_now) may be written in
/// place: its payload appended straight into the connection's send buffer, behind the frame
/// header, instead of into a buffer of its own that is then queued. For a reply that has to
/// be encoded anyway (the typed layer's protobuf messages); a handler that already holds its
/// reply's bytes returns them in [`CallNow::Done`](super::CallNow::Done).
///
/// Only where the transport can take the frame at once (corewire's framing, under the send
/// queue's limit with nobody waiting); elsewhere (gRPC, a full queue)
/// [`send_with`](ReplyTo::send_with) returns false and the reply goes back as a
/// [`Response`](super::Response).
#[derive(Clone, Copy)]
pub struct ReplyTo<'a> {
    sink: Option<&'a dyn ReplySink>,
}

impl fmt::Debug for ReplyTo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyTo")
            .field("in_place", &self.sink.is_some())
            .finish()
    }
}

impl<'a> ReplyTo<'a> {
    /// Nowhere: every reply goes back as a [`Response`](super::Response) (gRPC, which frames
    /// replies itself; tests).
    pub fn none() -> ReplyTo<'static> {
        ReplyTo { sink: None }
    }

    pub(crate) fn new(sink: &'a dyn ReplySink) -> ReplyTo<'a> {
        ReplyTo { sink: Some(sink) }
    }

    /// Whether [`send_with`](ReplyTo::send_with) may take a reply here (false: it returns
    /// false whatever it is given), so that a caller need not prepare one for nothing.
    pub fn in_place(&self) -> bool {
        self.sink.is_some()
    }

    /// Queue the call's successful reply, its payload (`payload_len` bytes) appended by
    /// `write` into the send buffer it is given (which holds nothing else), then
    /// `attachment`, if the connection takes it now; then return
    /// [`CallNow::Replied`](super::CallNow::Replied). False: nothing was queued and `write`
    /// was not called (or failed: it must append exactly `payload_len` bytes); return the
    /// reply in [`CallNow::Done`](super::CallNow::Done) instead. One reply per call: a second
    /// `send_with` returns false.
    pub fn send_with(
        &self,
        payload_len: usize,
        attachment: &[u8],
        write: impl FnOnce(&mut PayloadBuf<'_>),
    ) -> bool {
        let Some(sink) = self.sink else {
            return false;
        };
        let mut write = Some(write);
        sink.send_with(payload_len, attachment, &mut |buf| {
            if let Some(write) = write.take() {
                write(buf);
            }
        })
    }
}

/// What a [`ReplyTo`] writes into: the connection of the call being answered.
pub(crate) trait ReplySink {
    fn send_with(
        &self,
        payload_len: usize,
        attachment: &[u8],
        write: &mut dyn FnMut(&mut PayloadBuf<'_>),
    ) -> bool;
}

/// The reply to one request on `conn`, written in place at most once.
pub(crate) struct ConnReply<'a, C> {
    conn: &'a C,
    request: &'a FrameHeader,
    sent: Cell<bool>,
}

impl<'a, C: Connection> ConnReply<'a, C> {
    pub(crate) fn new(conn: &'a C, request: &'a FrameHeader) -> ConnReply<'a, C> {
        ConnReply {
            conn,
            request,
            sent: Cell::new(false),
        }
    }

    /// Whether the reply was queued in place: then the call is answered, whatever
    /// `call_now` returned.
    pub(crate) fn sent(&self) -> bool {
        self.sent.get()
    }
}

impl<C: Connection> ReplySink for ConnReply<'_, C> {
    fn send_with(
        &self,
        payload_len: usize,
        attachment: &[u8],
        write: &mut dyn FnMut(&mut PayloadBuf<'_>),
    ) -> bool {
        if self.sent.get() {
            return false;
        }
        let header = response_header(self.request);
        match self
            .conn
            .try_send_with(&header, payload_len, attachment, write)
        {
            Ok(queued) => {
                self.sent.set(queued);
                queued
            }
            Err(e) => {
                // Sent the ordinary way instead, which reports what is wrong with the
                // connection or the frame.
                tracing::debug!(error = %e, "reply not written in place");
                false
            }
        }
    }
}
