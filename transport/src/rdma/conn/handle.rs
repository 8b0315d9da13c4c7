//! [`RdmaConnection`]: the users' handle on a connection, implementing the transport's
//! [`Connection`] interface over the connection's reader and writer.

use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;

use bytes::Bytes;
use corewire_runtime::Budget;

use super::ConnCore;
use crate::conn::{ConnStats, Connection, PayloadBuf, TransportError, TransportKind};
use crate::frame::{Frame, FrameHeader};

/// Closes the connection when the last user handle goes away.
struct Owner(Rc<ConnCore>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.tx.out.close();
    }
}

/// A frame connection over RDMA (reliable connected queue pair, SEND/RECV).
#[derive(Clone)]
pub struct RdmaConnection {
    owner: Rc<Owner>,
}

impl RdmaConnection {
    pub(crate) fn new(core: Rc<ConnCore>) -> RdmaConnection {
        RdmaConnection {
            owner: Rc::new(Owner(core)),
        }
    }

    fn core(&self) -> &Rc<ConnCore> {
        &self.owner.0
    }

    /// Why the connection ended, if it has.
    pub fn end_reason(&self) -> Option<String> {
        self.core().life.borrow().reason().map(ToString::to_string)
    }

    /// The RDMA READ depths the queue pair settled on (large messages are pulled by READ:
    /// this many may be in flight each way), `None` once the connection is gone.
    pub fn read_depths(&self) -> Option<corewire_verbs::ReadDepths> {
        self.core().qp_do(|qp| qp.read_depths().ok()).flatten()
    }

    /// Force the queue pair into the error state (fault injection for tests): every posted
    /// work request is flushed and the connection ends with an error.
    pub fn inject_qp_error(&self) -> Result<(), TransportError> {
        match self.core().qp_do(|qp| qp.set_error()) {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(TransportError::other(e)),
            None => Err(TransportError::Closed),
        }
    }
}

impl Connection for RdmaConnection {
    /// Cancel-safe: a frame is queued whole or not at all.
    fn send(
        &self,
        header: &FrameHeader,
        payload: Bytes,
        attachment: Bytes,
    ) -> impl Future<Output = Result<(), TransportError>> {
        self.core().send_frame(header, payload, attachment)
    }

    /// In place on a busy connection; an idle one posts the ordinary way (see
    /// `ConnCore::try_send_frame_with`).
    fn try_send_with(
        &self,
        header: &FrameHeader,
        payload_len: usize,
        attachment: &[u8],
        write: impl FnOnce(&mut PayloadBuf<'_>),
    ) -> Result<bool, TransportError> {
        self.core()
            .try_send_frame_with(header, payload_len, attachment, write)
    }

    async fn ready_to_send(&self) -> Result<(), TransportError> {
        let c = self.core();
        if !c.is_ended() && c.tx.out.wait_for_room().await && !c.is_ended() {
            Ok(())
        } else {
            Err(TransportError::Closed)
        }
    }

    /// Cancel-safe: every received byte stays buffered in the connection (the frame decoder
    /// and its input live there, not in the future), and a frame is taken out only in the
    /// poll that returns it, so dropping this future loses nothing and the next call carries
    /// on.
    fn recv(&self) -> impl Future<Output = Result<Option<Frame>, TransportError>> {
        self.core().recv_frame()
    }

    fn close(&self) {
        self.core().tx.out.close();
    }

    fn is_closed(&self) -> bool {
        self.core().is_ended() || self.core().tx.out.is_closed()
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.core().peer
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Rdma
    }

    fn budget(&self) -> Budget {
        self.core().budget
    }

    fn arrived_at(&self) -> u64 {
        self.core().rx.round.borrow().arrived_at()
    }

    fn stats(&self) -> ConnStats {
        let c = self.core();
        c.stats.snapshot(c.tx.out.queued_bytes())
    }
}
