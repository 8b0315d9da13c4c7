//! The services of one server on one shard, by id.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use corewire_runtime::ShardId;

use super::{CallNow, Request, Response, Service, Status};

pub(crate) type CallFuture = Pin<Box<dyn Future<Output = Result<Response, Status>>>>;

/// Object-safe view of a [`Service`] instance.
pub(crate) trait DynService {
    fn call(self: Rc<Self>, request: Request) -> CallFuture;
    fn call_now(&self, request: Request) -> CallNow;
}

struct Instance<S>(S);

impl<S: Service> DynService for Instance<S> {
    fn call(self: Rc<Self>, request: Request) -> CallFuture {
        Box::pin(async move { self.0.call(request).await })
    }

    fn call_now(&self, request: Request) -> CallNow {
        self.0.call_now(request)
    }
}

/// Creates a service instance on a shard. `Send + Sync`: it travels to every shard.
pub(crate) type Factory = Arc<dyn Fn(ShardId) -> (u32, Rc<dyn DynService>) + Send + Sync>;

pub(crate) fn factory<S, F>(f: F) -> Factory
where
    S: Service,
    F: Fn(ShardId) -> S + Send + Sync + 'static,
{
    Arc::new(move |shard| (S::ID, Rc::new(Instance(f(shard))) as Rc<dyn DynService>))
}

/// One server's service instances on one shard, sorted by id: a lookup per request is a
/// binary search over a handful of entries, no hashing.
pub(crate) struct ServiceSet {
    services: Vec<(u32, Rc<dyn DynService>)>,
}

impl ServiceSet {
    pub(crate) fn build(factories: &[Factory], shard: ShardId) -> ServiceSet {
        // A later registration of the same id replaces an earlier one.
        let by_id: HashMap<u32, Rc<dyn DynService>> = factories.iter().map(|f| f(shard)).collect();
        let mut services: Vec<_> = by_id.into_iter().collect();
        services.sort_unstable_by_key(|&(id, _)| id);
        ServiceSet { services }
    }

    pub(crate) fn get(&self, id: u32) -> Option<&Rc<dyn DynService>> {
        let at = self
            .services
            .binary_search_by_key(&id, |&(id, _)| id)
            .ok()?;
        Some(&self.services[at].1)
    }
}
