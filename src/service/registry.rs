//! The services of one server on one shard, by id.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use corewire_runtime::ShardId;

use super::{CallNow, MethodInfo, MethodKind, Replies, Request, Response, Service, Status};

pub(crate) type CallFuture = Pin<Box<dyn Future<Output = Result<Response, Status>>>>;
pub(crate) type StreamFuture = Pin<Box<dyn Future<Output = Result<(), Status>>>>;

/// Object-safe view of a [`Service`] instance.
pub(crate) trait DynService {
    fn call(self: Rc<Self>, request: Request) -> CallFuture;
    fn call_now(&self, request: Request) -> CallNow;
    fn call_streaming(self: Rc<Self>, request: Request, replies: Replies) -> StreamFuture;
}

struct Instance<S>(S);

impl<S: Service> DynService for Instance<S> {
    fn call(self: Rc<Self>, request: Request) -> CallFuture {
        Box::pin(async move { self.0.call(request).await })
    }

    fn call_now(&self, request: Request) -> CallNow {
        self.0.call_now(request)
    }

    fn call_streaming(self: Rc<Self>, request: Request, replies: Replies) -> StreamFuture {
        Box::pin(async move { self.0.call_streaming(request, replies).await })
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
        make: Arc::new(move |shard| Rc::new(Instance(f(shard))) as Rc<dyn DynService>),
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
