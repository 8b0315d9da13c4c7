//! One connection's server loop: read frames, dispatch requests to the shard's service
//! instances, reply by correlation id (replies may complete out of order).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use corewire_runtime::{spawn_local, with_local_stats, JoinHandle, RoundBudget};
use corewire_transport::frame::{Frame, FrameHeader, FrameKind};
use corewire_transport::rpc::{error_header, request_deadline, response_header};
use corewire_transport::{Connection, TransportError};

use super::registry::ServiceSet;
use super::server::ServerOptions;
use super::{Request, Status};

type InFlight = Rc<RefCell<HashMap<u64, JoinHandle<()>>>>;

/// Serve `conn` until the peer closes it or breaks the protocol. Any transport works: this is
/// how TCP and RDMA listeners hand their connections to a server.
pub(crate) async fn serve<C: Connection>(
    conn: C,
    services: Rc<ServiceSet>,
    options: ServerOptions,
) {
    let in_flight: InFlight = Rc::default();
    let mut budget = RoundBudget::new(conn.budget());
    let peer = conn.peer_addr();
    let span = tracing::debug_span!("conn", ?peer, transport = ?conn.kind());
    let _enter = span.enter();
    loop {
        let frame = match conn.recv().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                close_for(&conn, &e);
                break;
            }
        };
        let size = frame.payload.len() + frame.attachment.len();
        match frame.header.kind {
            FrameKind::Request => dispatch(&conn, frame, &services, &in_flight, &options).await,
            FrameKind::Cancel => {
                let task = in_flight.borrow_mut().remove(&frame.header.correlation_id);
                if let Some(task) = task {
                    task.abort();
                    let reply = Status::Cancelled.to_header(&frame.header);
                    let _ = conn.send(&reply, Bytes::new(), Bytes::new()).await;
                }
            }
            FrameKind::Response | FrameKind::Error => {
                tracing::warn!(
                    correlation_id = frame.header.correlation_id,
                    "closing connection: peer sent a response to a request never made"
                );
                with_local_stats(|s| s.protocol_errors.incr());
                conn.close();
                break;
            }
        }
        if budget.charge(size) {
            budget.yield_if_exhausted().await;
        }
    }
    // Requests still running finish and reply; the connection closes when the last one
    // drops its handle.
}

fn close_for<C: Connection>(conn: &C, e: &TransportError) {
    match e {
        TransportError::Protocol(_) | TransportError::Truncated { .. } => {
            with_local_stats(|s| s.protocol_errors.incr());
            tracing::warn!(peer = ?conn.peer_addr(), reason = %e, "closing connection");
        }
        _ => tracing::debug!(peer = ?conn.peer_addr(), reason = %e, "connection ended"),
    }
    conn.close();
}

async fn reply_error<C: Connection>(conn: &C, request: &FrameHeader, status: Status) {
    let header = status.to_header(request);
    let _ = conn.send(&header, Bytes::new(), Bytes::new()).await;
}

async fn dispatch<C: Connection>(
    conn: &C,
    frame: Frame,
    services: &ServiceSet,
    in_flight: &InFlight,
    options: &ServerOptions,
) {
    let header = frame.header;
    let Some(service) = services.get(header.service_id) else {
        return reply_error(conn, &header, Status::UnknownService(header.service_id)).await;
    };
    if in_flight.borrow().len() >= options.max_in_flight_per_conn {
        return reply_error(conn, &header, Status::Overloaded).await;
    }
    let now = Instant::now();
    let deadline = request_deadline(&header, now);
    if deadline.is_some_and(|d| d <= now) {
        return reply_error(conn, &header, Status::DeadlineExceeded).await;
    }
    let request = Request {
        method: header.method_id,
        payload: frame.payload,
        attachment: frame.attachment,
        deadline,
        peer: conn.peer_addr(),
        shard: corewire_runtime::shard_id(),
    };
    let call = service.call(request);
    let conn = conn.clone();
    let id = header.correlation_id;
    let registry = in_flight.clone();
    let task = spawn_local(async move {
        let result = match deadline {
            Some(d) => corewire_runtime::timeout(d.saturating_duration_since(Instant::now()), call)
                .await
                .unwrap_or(Err(Status::DeadlineExceeded)),
            None => call.await,
        };
        registry.borrow_mut().remove(&id);
        let sent = match result {
            Ok(resp) => {
                conn.send(&response_header(&header), resp.payload, resp.attachment)
                    .await
            }
            Err(status) => {
                let h = error_header(&header, status.status(), &status.to_string());
                conn.send(&h, Bytes::new(), Bytes::new()).await
            }
        };
        if let Err(e) = sent {
            tracing::debug!(error = %e, "reply not sent");
        }
    });
    if !task.is_finished() {
        in_flight.borrow_mut().insert(id, task);
    }
}

/// Public entry point for transports: serve `conn` with `server`'s services on this shard.
pub async fn serve_connection<C: Connection>(server: &super::Server, conn: C) {
    let services = server.services_here();
    serve(conn, services, server.options()).await
}
