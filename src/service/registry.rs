//! The services of one server on one shard, by id.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use corewire_runtime::ShardId;

use super::dispatch::guarded;
use super::{
    CallNow, EncodeReply, MethodInfo, MethodKind, Replies, ReplyTo, Request, Response, Service,
    Status,
};

pub(crate) type CallFuture = Pin<Box<dyn ServeCall>>;
pub(crate) type StreamFuture = Pin<Box<dyn Future<Output = Result<(), Status>>>>;

/// A call's future ([`Service::call_in_place`]) as the server keeps it: polled with where its
/// reply may be written in place.
pub(crate) trait ServeCall {
    /// Poll the call; when it is done, its reply goes through `reply` if it can be written
    /// in place (then the call is answered and what this returns is dropped), else it is
    /// returned as bytes.
    fn poll_serve(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        reply: ReplyTo<'_>,
    ) -> Poll<Result<Response, Status>>;
}

pin_project_lite::pin_project! {
    /// A [`Service::call_in_place`] future, its reply written in place or turned into bytes.
    struct InPlace<F> {
        #[pin]
        call: F,
    }
}

impl<F, R> ServeCall for InPlace<F>
where
    F: Future<Output = Result<R, Status>>,
    R: EncodeReply,
{
    #[inline]
    fn poll_serve(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        reply: ReplyTo<'_>,
    ) -> Poll<Result<Response, Status>> {
        match self.project().call.poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(status)) => Poll::Ready(Err(status)),
            Poll::Ready(Ok(answer)) if answer.reply_in_place(reply) => {
                Poll::Ready(Ok(Response::default()))
            }
            Poll::Ready(Ok(answer)) => Poll::Ready(Ok(answer.into_response())),
        }
    }
}

/// Object-safe view of a [`Service`] instance.
pub(crate) trait DynService {
    /// [`Service::call_in_place`]'s future, polled once (with `cx`, the reader's): its result
    /// if it answered at once (most calls; written in place through `reply` if it could be),
    /// else the future, which has to wait.
    fn call_polled(
        self: Rc<Self>,
        request: Request,
        cx: &mut Context<'_>,
        reply: ReplyTo<'_>,
    ) -> Result<Result<Response, Status>, CallFuture>;
    fn call_now(&self, request: Request, reply: ReplyTo<'_>) -> CallNow;
    fn call_streaming(self: Rc<Self>, request: Request, replies: Replies) -> StreamFuture;
}

struct Instance<S> {
    service: S,
    /// The allocation of the last call that answered on its first poll, kept for the next
    /// call (its future has ended and holds nothing): a call that answers at once then costs
    /// no allocation. It holds `Option<Pin<Box<F>>>` for the future type `F` of
    /// [`DynService::call_polled`], which has no name, hence `Any`.
    spare: RefCell<Option<Box<dyn Any>>>,
}

impl<S: Service> Instance<S> {
    fn new(service: S) -> Instance<S> {
        Instance {
            service,
            spare: RefCell::new(None),
        }
    }
}

impl<S: Service> DynService for Instance<S> {
    fn call_polled(
        self: Rc<Self>,
        request: Request,
        cx: &mut Context<'_>,
        reply: ReplyTo<'_>,
    ) -> Result<Result<Response, Status>, CallFuture> {
        let home = Rc::clone(&self);
        let future = InPlace {
            call: async move {
                // Moved into the body, so that a finished future (kept as the spare) no longer
                // holds the instance.
                let this = self;
                this.service.call_in_place(request).await
            },
        };
        // Out of the cell while the handler runs (it may reach this instance again).
        let mut spare = home.spare.take();
        let mut call = place(&mut spare, future);
        let polled = guarded(|| call.as_mut().poll_serve(cx, reply));
        let result = match polled {
            Poll::Ready(result) => {
                keep(&mut spare, call);
                Ok(result)
            }
            Poll::Pending => {
                let call: CallFuture = call;
                Err(call)
            }
        };
        home.spare.replace(spare);
        result
    }

    fn call_now(&self, request: Request, reply: ReplyTo<'_>) -> CallNow {
        self.service.call_now(request, reply)
    }

    fn call_streaming(self: Rc<Self>, request: Request, replies: Replies) -> StreamFuture {
        Box::pin(async move { self.service.call_streaming(request, replies).await })
    }
}

/// `future` in the spare allocation when there is one (a finished future of the same type:
/// [`Pin::set`] drops it in place), else in a new one.
fn place<F: 'static>(spare: &mut Option<Box<dyn Any>>, future: F) -> Pin<Box<F>> {
    let kept = (spare.as_mut())
        .and_then(|s| s.downcast_mut::<Option<Pin<Box<F>>>>())
        .and_then(Option::take);
    match kept {
        Some(mut call) => {
            call.set(future);
            call
        }
        None => Box::pin(future),
    }
}

/// Keeps the allocation of `call`, which has finished, for the next call.
fn keep<F: 'static>(spare: &mut Option<Box<dyn Any>>, call: Pin<Box<F>>) {
    match spare
        .as_mut()
        .and_then(|s| s.downcast_mut::<Option<Pin<Box<F>>>>())
    {
        Some(slot) => *slot = Some(call),
        None => *spare = Some(Box::new(Some(call))),
    }
}

/// Creates a service instance on a shard. `Send + Sync`: it travels to every shard.
pub(crate) type Factory = Arc<dyn Fn(ShardId) -> Rc<dyn DynService> + Send + Sync>;

/// A registered service: what it is called and how to make it.
#[derive(Clone)]
pub(crate) struct Registration {
    pub(crate) id: u32,
    pub(crate) name: &'static str,
    pub(crate) methods: &'static [MethodInfo],
    pub(crate) make: Factory,
}

pub(crate) fn registration<S, F>(f: F) -> Registration
where
    S: Service,
    F: Fn(ShardId) -> S + Send + Sync + 'static,
{
    Registration {
        id: S::ID,
        name: S::NAME,
        methods: S::METHODS,
        make: Arc::new(move |shard| Rc::new(Instance::new(f(shard))) as Rc<dyn DynService>),
    }
}

/// The registrations a server keeps: one per id (a later one of the same name replaces an
/// earlier one). Two services whose names give the same id, or two methods of a service
/// whose names give the same id, are refused here, when the server is built, rather than
/// misrouting calls later.
pub(crate) fn check(registrations: Vec<Registration>) -> Result<Vec<Registration>, String> {
    let mut by_id: HashMap<u32, Registration> = HashMap::new();
    for r in registrations {
        let mut ids = HashMap::new();
        for m in r.methods {
            if let Some(other) = ids.insert(m.id, m.name) {
                return Err(format!(
                    "methods {other} and {} of service {} have the same id {:#x}: rename one",
                    m.name, r.name, m.id
                ));
            }
        }
        if let Some(old) = by_id.get(&r.id) {
            if old.name != r.name {
                return Err(format!(
                    "services {:?} and {:?} have the same id {:#x}: rename one or give it \
                     another ID",
                    old.name, r.name, r.id
                ));
            }
        }
        by_id.insert(r.id, r);
    }
    let mut kept: Vec<_> = by_id.into_values().collect();
    kept.sort_unstable_by_key(|r| r.id);
    Ok(kept)
}

/// A method found by its gRPC name.
#[cfg(feature = "grpc")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    pub(crate) service: u32,
    pub(crate) method: MethodInfo,
}

/// Every named method of a server by its full name (`/package.Service/Method`).
#[cfg(feature = "grpc")]
pub(crate) fn routes(registrations: &[Registration]) -> HashMap<&'static str, Route> {
    registrations
        .iter()
        .flat_map(|r| {
            r.methods.iter().map(|m| {
                (
                    m.name,
                    Route {
                        service: r.id,
                        method: *m,
                    },
                )
            })
        })
        .collect()
}

/// One service instance on this shard.
pub(crate) struct Entry {
    id: u32,
    pub(crate) instance: Rc<dyn DynService>,
    /// Ids of its server-streaming methods (empty for most services: no lookup then).
    streaming: Box<[u32]>,
}

impl Entry {
    pub(crate) fn streams(&self, method: u32) -> bool {
        !self.streaming.is_empty() && self.streaming.contains(&method)
    }
}

/// One server's service instances on one shard, sorted by id: a lookup per request is a
/// binary search over a handful of entries, no hashing.
pub(crate) struct ServiceSet {
    services: Vec<Entry>,
}

impl ServiceSet {
    /// `registrations` as [`check`] left them (one per id, sorted).
    pub(crate) fn build(registrations: &[Registration], shard: ShardId) -> ServiceSet {
        let services = registrations
            .iter()
            .map(|r| Entry {
                id: r.id,
                instance: (r.make)(shard),
                streaming: r
                    .methods
                    .iter()
                    .filter(|m| m.kind == MethodKind::ServerStreaming)
                    .map(|m| m.id)
                    .collect(),
            })
            .collect();
        ServiceSet { services }
    }

    pub(crate) fn get(&self, id: u32) -> Option<&Entry> {
        let at = self.services.binary_search_by_key(&id, |e| e.id).ok()?;
        Some(&self.services[at])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    async fn answer(n: u32) -> u32 {
        n
    }

    fn address<F>(call: &Pin<Box<F>>) -> usize {
        &**call as *const F as usize
    }

    #[test]
    fn a_finished_calls_allocation_serves_the_next_call() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut spare = None;
        let mut first = place(&mut spare, answer(1));
        assert_eq!(first.as_mut().poll(&mut cx), Poll::Ready(1));
        let at = address(&first);
        keep(&mut spare, first);
        let mut second = place(&mut spare, answer(2));
        assert_eq!(address(&second), at, "the same allocation");
        assert_eq!(second.as_mut().poll(&mut cx), Poll::Ready(2));
        // While that one is out (a call that waits keeps it), the next gets its own.
        let mut third = place(&mut spare, answer(3));
        assert_ne!(address(&third), at);
        assert_eq!(third.as_mut().poll(&mut cx), Poll::Ready(3));
    }

    struct Echo;
    impl Service for Echo {
        const ID: u32 = 1;
        async fn call(&self, request: Request) -> Result<Response, Status> {
            Ok(Response::new(request.payload))
        }
    }

    /// The spare a finished call leaves holds neither the instance nor the request.
    #[test]
    fn the_spare_holds_nothing_of_the_call() {
        let mut cx = Context::from_waker(Waker::noop());
        let instance = Rc::new(Instance::new(Echo));
        let payload = bytes::Bytes::from(vec![1u8; 100]);
        for _ in 0..3 {
            let request = Request {
                method: 0,
                payload: payload.clone(),
                attachment: bytes::Bytes::new(),
                deadline: None,
                peer: None,
                shard: 0,
            };
            let reply = Rc::clone(&instance).call_polled(request, &mut cx, ReplyTo::none());
            let Ok(Ok(reply)) = reply else {
                panic!("the echo answers at once");
            };
            assert_eq!(reply.payload, payload);
        }
        assert!(instance.spare.borrow().is_some());
        assert_eq!(Rc::strong_count(&instance), 1);
        drop(instance);
        assert!(payload.is_unique(), "the request's payload is not kept");
    }
}
