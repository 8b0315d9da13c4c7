//! Cross-shard messaging. Each shard has a bounded inbox of closures; `submit_to` runs a
//! closure on another shard and returns a future of its result. A full inbox makes the sender
//! wait (backpressure), and a busy receiver is never woken by a syscall.

pub(crate) mod oneshot;

use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub use oneshot::RemoteHandle;
pub(crate) use oneshot::{channel, Sender};

use crate::executor::JoinError;
use crate::shard::{context, Message, ShardId, ShardRemote};

/// Why a cross-shard call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MeshError {
    /// No shard with that id.
    NoSuchShard(ShardId),
    /// The closure's task ended without a result (panicked, or the shard stopped).
    Aborted,
}

impl std::fmt::Display for MeshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MeshError::NoSuchShard(s) => write!(f, "no shard {s}"),
            MeshError::Aborted => f.write_str("the remote task ended without a result"),
        }
    }
}

impl std::error::Error for MeshError {}

impl From<JoinError> for MeshError {
    fn from(_: JoinError) -> MeshError {
        MeshError::Aborted
    }
}

/// Build the message that runs `f` on the target shard and sends its output back.
pub(crate) fn task_message<F, Fut, T>(
    f: F,
    tx: Sender<T>,
    spawned_at: &'static Location<'static>,
) -> Message
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    Box::new(move || {
        let task = async move {
            let out = f().await;
            tx.send(out);
        };
        context::with_executor(|e| e.spawn(task, spawned_at));
    })
}

/// Run `f` on shard `target` (it may return a `!Send` future: it is created there) and await
/// its output. Called from a shard; from other threads use `Runtime::spawn_on`.
#[track_caller]
pub fn submit_to<F, Fut, T>(target: ShardId, f: F) -> SubmitTo<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let spawned_at = Location::caller();
    let ctx = context::current();
    let Some(remote) = ctx.peers.get(target).cloned() else {
        return SubmitTo {
            state: SubmitState::Failed(Some(MeshError::NoSuchShard(target))),
        };
    };
    let (tx, rx) = channel();
    let msg = task_message(f, tx, spawned_at);
    SubmitTo {
        state: SubmitState::Sending {
            remote,
            msg: Some(msg),
            rx,
        },
    }
}

/// [`submit_to`] for a caller that cannot await: the handle is returned at once and the
/// message is delivered by a task on this shard (which waits while the target's inbox is
/// full). Called from a shard; panics if `target` is out of range, as `Runtime::spawn_on`.
#[track_caller]
pub(crate) fn spawn_on_peer<F, Fut, T>(target: ShardId, f: F) -> RemoteHandle<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let spawned_at = Location::caller();
    let remote = context::current().peers[target].clone();
    let (tx, rx) = channel();
    let mut msg = Some(task_message(f, tx, spawned_at));
    let deliver = async move { std::future::poll_fn(|cx| push(&remote, &mut msg, cx)).await };
    context::with_executor(|e| e.spawn(deliver, spawned_at));
    rx
}

/// Send a fire-and-forget closure to shard `target` (waits while its inbox is full).
pub async fn send_to<F>(target: ShardId, f: F) -> Result<(), MeshError>
where
    F: FnOnce() + Send + 'static,
{
    let ctx = context::current();
    let remote = ctx
        .peers
        .get(target)
        .cloned()
        .ok_or(MeshError::NoSuchShard(target))?;
    let mut msg: Option<Message> = Some(Box::new(f));
    std::future::poll_fn(|cx| push(&remote, &mut msg, cx)).await;
    Ok(())
}

fn push(remote: &Arc<ShardRemote>, msg: &mut Option<Message>, cx: &mut Context<'_>) -> Poll<()> {
    let Some(m) = msg.take() else {
        return Poll::Ready(());
    };
    match remote.try_send(m) {
        Ok(()) => {
            if let Some(ctx) = context::try_current() {
                ctx.remote.stats.mesh_sent.incr();
            }
            Poll::Ready(())
        }
        Err(m) => {
            remote.stats.mesh_full.incr();
            remote.wait_for_room(cx.waker());
            // The receiver may have drained between our push and our registration.
            match remote.try_send(m) {
                Ok(()) => Poll::Ready(()),
                Err(m) => {
                    *msg = Some(m);
                    Poll::Pending
                }
            }
        }
    }
}

enum SubmitState<T> {
    Sending {
        remote: Arc<ShardRemote>,
        msg: Option<Message>,
        rx: RemoteHandle<T>,
    },
    Waiting(RemoteHandle<T>),
    Failed(Option<MeshError>),
}

/// The future of [`submit_to`]: the output of the work run on the target shard.
#[must_use = "futures do nothing unless awaited"]
pub struct SubmitTo<T> {
    state: SubmitState<T>,
}

impl<T> Unpin for SubmitTo<T> {}

impl<T: Send> Future for SubmitTo<T> {
    type Output = Result<T, MeshError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match &mut self.state {
                SubmitState::Failed(e) => {
                    return Poll::Ready(Err(e.take().unwrap_or(MeshError::Aborted)))
                }
                SubmitState::Sending { remote, msg, .. } => {
                    if push(remote, msg, cx).is_pending() {
                        return Poll::Pending;
                    }
                    let state = std::mem::replace(&mut self.state, SubmitState::Failed(None));
                    if let SubmitState::Sending { rx, .. } = state {
                        self.state = SubmitState::Waiting(rx);
                    }
                }
                SubmitState::Waiting(rx) => {
                    return Pin::new(rx).poll(cx).map(|r| r.map_err(MeshError::from));
                }
            }
        }
    }
}
