//! One connection's server loop: read frames, dispatch requests to the shard's service
//! instances, reply by correlation id (replies may complete out of order).
//!
//! Memory stays bounded whatever the peer does: a request counts against the connection's
//! window (`max_in_flight_per_conn`) from the moment it is read until its reply is queued,
//! and the reader reads nothing while the window is full or the connection's send queue is
//! over its limit. A peer that sends without reading fills its own socket buffers and stops.
//!
//! Fairness needs nothing here: the connection's `recv` charges its budget and yields.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use corewire_runtime::head_of_line::HeadOfLine;
use corewire_runtime::sync::{mpsc, Notify};
use corewire_runtime::{report_protocol_error, spawn_local, JoinHandle};
use corewire_transport::frame::{Frame, FrameHeader, FrameKind};
use corewire_transport::rpc::{
    parse_credit, request_deadline, response_header, ServerCalls, StartError,
};
use corewire_transport::{Connection, TransportError};

use super::registry::{CallFuture, DynService, ServiceSet, StreamFuture};
use super::server::ServerOptions;
use super::stream::{CreditGate, Replies};
use super::{CallNow, ConnReply, ReplyTo, Request, Response, Status};

/// A request running in a task of its own.
struct RunningCall {
    task: JoinHandle<()>,
    /// A streamed reply's credit, fed by the client's Credit frames.
    credit: Option<Rc<CreditGate>>,
}

/// The requests running on one connection, shared by the reader and the handler tasks.
struct Running {
    calls: RefCell<ServerCalls<RunningCall>>,
    /// Wakes the reader parked while the window is full. A `finish` while the reader is not
    /// parked stores a permit; a stale permit costs one extra look at `is_full`, never a
    /// lost wake-up.
    reader: Notify,
}

impl Running {
    fn is_full(&self) -> bool {
        self.calls.borrow().is_full()
    }

    async fn wait_for_window(&self) {
        // No await between the check and `notified()`: on one shard, no `finish` can slip in.
        while self.is_full() {
            self.reader.notified().await;
        }
    }

    fn finish(&self, id: u64) {
        let done = self.calls.borrow_mut().finish(id);
        drop(done);
        self.reader.notify_one();
    }
}

/// Ends request `id` however its task ends: reply queued, aborted by a Cancel, or dropped at
/// shutdown.
struct InFlight {
    running: Rc<Running>,
    id: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.running.finish(self.id);
    }
}

/// Serve `conn` until the peer closes it or breaks the protocol. Any transport works: this is
/// how TCP and RDMA listeners hand their connections to a server. Each request's head-of-line
/// count goes to `head_of_line` (its listener's) when its reply is queued.
pub(crate) async fn serve<C: Connection>(
    conn: C,
    services: Rc<ServiceSet>,
    options: ServerOptions,
    head_of_line: Option<Arc<HeadOfLine>>,
) {
    let running = Rc::new(Running {
        calls: RefCell::new(ServerCalls::new(options.max_in_flight_per_conn)),
        reader: Notify::new(),
    });
    let peer = conn.peer_addr();
    let span = tracing::debug_span!("conn", ?peer, transport = ?conn.kind());
    let _enter = span.enter();
    loop {
        // Backpressure: read nothing more while the window is full or replies back up.
        running.wait_for_window().await;
        if conn.ready_to_send().await.is_err() {
            break;
        }
        let frame = match conn.recv().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                close_for(&conn, &e);
                break;
            }
        };
        match frame.header.kind {
            FrameKind::Request => {
                let arrived = Arrived {
                    at: conn.arrived_at(),
                    record: head_of_line.clone(),
                };
                if let Err(e) = dispatch(&conn, frame, &services, &running, arrived).await {
                    report_protocol_error("rpc", conn.peer_addr(), &e);
                    conn.close();
                    break;
                }
            }
            FrameKind::Cancel => {
                let task = running
                    .calls
                    .borrow_mut()
                    .finish(frame.header.correlation_id);
                if let Some(call) = task {
                    // Dropping the task ends its `InFlight` (it found the id gone already).
                    call.task.abort();
                    let reply = Status::Cancelled.to_header(&frame.header);
                    let _ = conn.send(&reply, Bytes::new(), Bytes::new()).await;
                }
            }
            FrameKind::Credit => {
                if let Err(why) = credit(&running, &frame) {
                    report_protocol_error("rpc", conn.peer_addr(), &why);
                    conn.close();
                    break;
                }
            }
            FrameKind::Response | FrameKind::Error | FrameKind::StreamItem => {
                report_protocol_error(
                    "rpc",
                    conn.peer_addr(),
                    &format_args!(
                        "peer sent a response to a request never made (correlation id {})",
                        frame.header.correlation_id
                    ),
                );
                conn.close();
                break;
            }
            // A kind newer than this server: nothing it can answer.
            kind => {
                report_protocol_error(
                    "rpc",
                    conn.peer_addr(),
                    &format_args!("unexpected {kind:?} frame"),
                );
                conn.close();
                break;
            }
        }
    }
    // Requests still running finish and reply; the connection closes when the last one
    // drops its handle.
}

/// A Credit frame: more messages the stream it names may send. Credit for a stream that has
/// ended is late, not wrong; a malformed grant or one past the window is a protocol error.
fn credit(running: &Running, frame: &Frame) -> Result<(), String> {
    let id = frame.header.correlation_id;
    let Some(n) = parse_credit(&frame.payload) else {
        return Err(format!(
            "credit frame for {id} with a {}-byte payload",
            frame.payload.len()
        ));
    };
    let calls = running.calls.borrow();
    match calls.get(id).and_then(|c| c.credit.as_ref()) {
        Some(gate) => gate.grant(n).map_err(|e| format!("stream {id}: {e}")),
        None if calls.get(id).is_some() => Err(format!("credit frame for unary call {id}")),
        None => Ok(()),
    }
}

fn close_for<C: Connection>(conn: &C, e: &TransportError) {
    match e {
        TransportError::Protocol(_) | TransportError::Truncated { .. } => {
            report_protocol_error("rpc", conn.peer_addr(), e);
        }
        _ => tracing::debug!(peer = ?conn.peer_addr(), reason = %e, "connection ended"),
    }
    conn.close();
}

/// When a request's bytes arrived, and where its head-of-line count goes.
struct Arrived {
    at: u64,
    record: Option<Arc<HeadOfLine>>,
}

impl Arrived {
    /// The reply is queued now.
    fn replied(&self) {
        if let Some(h) = &self.record {
            h.record_since(self.at);
        }
    }
}

/// Start one request. `Err` only for a protocol violation (a correlation id reused while its
/// request runs): the connection must close.
async fn dispatch<C: Connection>(
    conn: &C,
    frame: Frame,
    services: &ServiceSet,
    running: &Rc<Running>,
    arrived: Arrived,
) -> Result<(), StartError> {
    let header = frame.header;
    let id = header.correlation_id;
    running.calls.borrow().check(id)?;
    let Some(entry) = services.get(header.service_id) else {
        reply(
            conn,
            &header,
            Err(Status::UnknownService(header.service_id)),
        )
        .await;
        return Ok(());
    };
    let service = &entry.instance;
    // The clock is read only for a request that carries a deadline (most do not, and a
    // clock read per request shows in the profile of a small-message load).
    let deadline = match header.deadline {
        None => None,
        Some(_) => {
            let now = Instant::now();
            let deadline = request_deadline(&header, now);
            if deadline.is_some_and(|d| d <= now) {
                reply(conn, &header, Err(Status::DeadlineExceeded)).await;
                return Ok(());
            }
            deadline
        }
    };
    let request = Request {
        method: header.method_id,
        payload: frame.payload,
        attachment: frame.attachment,
        deadline,
        peer: conn.peer_addr(),
        shard: corewire_runtime::shard_id(),
    };
    if entry.streams(header.method_id) {
        let credit = Rc::new(CreditGate::default());
        let (replies, rx) = Replies::channel();
        let call = Rc::clone(service).call_streaming(request, replies);
        let in_flight = InFlight {
            running: running.clone(),
            id,
        };
        let task = spawn_local(stream_replies(
            conn.clone(),
            header,
            call,
            rx,
            credit.clone(),
            deadline,
            in_flight,
            arrived,
        ));
        running.calls.borrow_mut().start(
            id,
            RunningCall {
                task,
                credit: Some(credit),
            },
        )?;
        return Ok(());
    }
    // The fastest path: a handler that answers in `call_now` costs no future at all (and a
    // reply it writes in place no buffer of its own).
    let in_place = ConnReply::new(conn, &header);
    let now = call_now(&**service, request, ReplyTo::new(&in_place));
    if in_place.sent() {
        // Answered, whatever it returned (even a panic after the reply left).
        arrived.replied();
        return Ok(());
    }
    let request = match now {
        CallNow::Done(result) => {
            if reply(conn, &header, result).await {
                arrived.replied();
            }
            return Ok(());
        }
        CallNow::Replied => {
            if reply(conn, &header, Err(replied_nothing())).await {
                arrived.replied();
            }
            return Ok(());
        }
        CallNow::Later(request) => request,
    };
    // The fast path: most handlers answer on their first poll, so poll it here, in the
    // reader, and queue the reply: no task, no run-queue round trip. Only a handler that has
    // to wait gets a task (the reader goes on reading meanwhile).
    let call = match poll_once(Rc::clone(service), request, ReplyTo::new(&in_place)).await {
        Ok(_) if in_place.sent() => {
            arrived.replied();
            return Ok(());
        }
        Ok(result) => {
            if reply(conn, &header, result).await {
                arrived.replied();
            }
            return Ok(());
        }
        Err(call) => call,
    };
    let conn = conn.clone();
    // Counted from here until the reply is queued.
    let in_flight = InFlight {
        running: running.clone(),
        id,
    };
    let task = spawn_local(async move {
        let _in_flight = in_flight;
        let mut call = call;
        // The reply is written in place when it is ready, as on the first poll.
        let in_place = ConnReply::new(&conn, &header);
        let call = poll_fn(|cx| call.as_mut().poll_serve(cx, ReplyTo::new(&in_place)));
        let result = match deadline {
            Some(d) => corewire_runtime::timeout(d.saturating_duration_since(Instant::now()), call)
                .await
                .unwrap_or(Err(Status::DeadlineExceeded)),
            None => call.await,
        };
        if in_place.sent() || reply(&conn, &header, result).await {
            arrived.replied();
        }
    });
    // The task has not run yet (spawned tasks run from the queue), so the id is still free.
    running
        .calls
        .borrow_mut()
        .start(id, RunningCall { task, credit: None })?;
    Ok(())
}

/// What woke a streaming call's task.
enum StreamEvent {
    Reply(Response),
    Done(Result<(), Status>),
}

/// Run a server-streaming handler and send its replies as StreamItem frames, each against
/// the client's credit, then the Response (or Error) that ends the stream. The handler is
/// polled only here, so while the client grants no credit the handler waits at its next
/// `send` (one reply outstanding): a reader that stops reading stops the handler.
#[allow(clippy::too_many_arguments)]
async fn stream_replies<C: Connection>(
    conn: C,
    request: FrameHeader,
    mut call: StreamFuture,
    mut rx: mpsc::Receiver<Response>,
    credit: Rc<CreditGate>,
    deadline: Option<Instant>,
    in_flight: InFlight,
    arrived: Arrived,
) {
    let _in_flight = in_flight;
    let mut timer = deadline.map(corewire_runtime::sleep_until);
    let mut done: Option<Result<(), Status>> = None;
    let item_header = FrameHeader {
        kind: FrameKind::StreamItem,
        ..response_header(&request)
    };
    let result = loop {
        let event = poll_fn(|cx| {
            if done.is_none() {
                if let Some(t) = timer.as_mut() {
                    if Pin::new(t).poll(cx).is_ready() {
                        return Poll::Ready(StreamEvent::Done(Err(Status::DeadlineExceeded)));
                    }
                }
                if let Poll::Ready(r) = poll_guarded(call.as_mut(), cx) {
                    done = Some(r);
                }
            }
            match rx.poll_recv(cx) {
                Poll::Ready(Some(item)) => Poll::Ready(StreamEvent::Reply(item)),
                // Replies sent before the handler returned go out first; the stream ends
                // once none is left (a `Replies` the handler kept elsewhere is cut off).
                _ => match &done {
                    Some(r) => Poll::Ready(StreamEvent::Done(r.clone())),
                    None => Poll::Pending,
                },
            }
        })
        .await;
        match event {
            StreamEvent::Reply(item) => {
                credit.take_one().await;
                if conn
                    .send(&item_header, item.payload, item.attachment)
                    .await
                    .is_err()
                {
                    return;
                }
            }
            StreamEvent::Done(result) => break result,
        }
    };
    if reply(&conn, &request, result.map(|()| Response::default())).await {
        arrived.replied();
    }
}

/// A handler's `call_now`. A panic in it fails the call as `Internal`, like one in `call`.
pub(crate) fn call_now(service: &dyn DynService, request: Request, reply: ReplyTo<'_>) -> CallNow {
    catch_unwind(AssertUnwindSafe(|| service.call_now(request, reply))).unwrap_or_else(|panic| {
        tracing::error!(panic = %panic_text(&panic), "service handler panicked");
        CallNow::Done(Err(Status::Internal("the handler panicked".into())))
    })
}

/// How a call fails whose `call_now` returned [`CallNow::Replied`] without a reply written in
/// place: the handler's bug, like a panic.
pub(crate) fn replied_nothing() -> Status {
    tracing::error!("service handler returned CallNow::Replied without replying");
    Status::Internal("the handler returned no reply".into())
}

/// A handler's call, polled once: its result, or its future when it has to wait. A panic in
/// it is the handler's bug: the call fails as `Internal` and the connection carries on.
pub(crate) async fn poll_once(
    service: Rc<dyn DynService>,
    request: Request,
    reply: ReplyTo<'_>,
) -> Result<Result<Response, Status>, CallFuture> {
    let mut start = Some((service, request));
    poll_fn(|cx| match start.take() {
        Some((service, request)) => Poll::Ready(service.call_polled(request, cx, reply)),
        // Ready on its first poll: never polled again.
        None => Poll::Pending,
    })
    .await
}

/// One poll of a handler's future; a panic in it fails the call as `Internal` (the handler's
/// bug, not the connection's).
pub(crate) fn poll_guarded<T>(
    call: Pin<&mut dyn Future<Output = Result<T, Status>>>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, Status>> {
    guarded(|| call.poll(cx))
}

/// [`poll_guarded`] of any poll.
pub(crate) fn guarded<T>(
    poll: impl FnOnce() -> Poll<Result<T, Status>>,
) -> Poll<Result<T, Status>> {
    catch_unwind(AssertUnwindSafe(poll)).unwrap_or_else(|panic| {
        tracing::error!(panic = %panic_text(&panic), "service handler panicked");
        Poll::Ready(Err(Status::Internal("the handler panicked".into())))
    })
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}

/// Queue the reply to `request`; false when the connection could not take it.
async fn reply<C: Connection>(
    conn: &C,
    request: &FrameHeader,
    result: Result<Response, Status>,
) -> bool {
    let sent = match result {
        Ok(resp) => {
            conn.send(&response_header(request), resp.payload, resp.attachment)
                .await
        }
        Err(status) => {
            conn.send(&status.to_header(request), Bytes::new(), Bytes::new())
                .await
        }
    };
    match sent {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(error = %e, "reply not sent");
            false
        }
    }
}

/// Public entry point for transports: serve `conn` with `server`'s services on this shard.
pub async fn serve_connection<C: Connection>(server: &super::Server, conn: C) {
    let services = server.services_here();
    serve(conn, services, server.options(), None).await
}
