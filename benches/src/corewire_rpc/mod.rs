//! corewire's own RPC framework as a benchmark peer: an echo [`Service`] served on corewire
//! shards, and a closed-loop client built on corewire's pipelining [`corewire::Client`], with the
//! same timeline, histograms and JSON report as `loadgen` and the tonic peer.

pub mod budget;
pub mod client;
pub mod server;
pub mod typed;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use corewire::{service_id, CallNow, ReplyTo, Request, Response, Service, Status};

/// Returns each request's payload as the response (like the tonic peer's `Echo/Echo`), after
/// spending `hash_rounds` passes of FNV-1a over it: the handler cost of the fairness workload,
/// 0 for the plain RPC benchmark.
#[derive(Debug, Default, Clone)]
pub struct Echo {
    pub hash_rounds: u32,
    /// Requests answered, counted by the shard that answered them (see [`Served`]).
    pub served: Option<(Arc<Served>, usize)>,
    /// Answer through `call`'s future only, not `call_now` (the server's `--no-call-now`: the
    /// path before `call_now` existed, to compare allocations and polls per request).
    pub no_call_now: bool,
}

/// The method clients call on [`Echo`].
pub const ECHO_METHOD: u32 = 0;

/// Requests answered per shard, each shard's counter on its own cache line so counting costs
/// no cross-core traffic.
#[derive(Debug)]
pub struct Served(Box<[Padded]>);

#[derive(Debug, Default)]
#[repr(align(64))]
struct Padded(AtomicU64);

impl Served {
    pub fn new(shards: usize) -> Served {
        Served((0..shards).map(|_| Padded::default()).collect())
    }

    fn count(&self, shard: usize) {
        let c = &self.0[shard].0;
        // Only this shard writes it: a load and a store, no locked instruction.
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    pub fn total(&self) -> u64 {
        self.0.iter().map(|p| p.0.load(Ordering::Relaxed)).sum()
    }
}

/// `rounds` passes of FNV-1a 64 over `bytes`, each seeded by the last: real work the optimizer
/// cannot drop, proportional to payload size × rounds.
pub fn spend(bytes: &[u8], rounds: u32) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for _ in 0..rounds {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

impl Echo {
    fn answer(&self, req: Request) -> Response {
        if self.hash_rounds > 0 {
            std::hint::black_box(spend(std::hint::black_box(&req.payload), self.hash_rounds));
        }
        if let Some((served, shard)) = &self.served {
            served.count(*shard);
        }
        // The payload is a slice of the connection's read buffer: echoing it copies nothing,
        // as the raw echo servers do.
        Response::new(req.payload)
    }
}

impl Service for Echo {
    const ID: u32 = service_id("corewire.bench.Echo");

    async fn call(&self, req: Request) -> Result<Response, Status> {
        Ok(self.answer(req))
    }

    /// Echo never waits: every request is answered on the fast path (no future, no task).
    fn call_now(&self, req: Request, _reply: ReplyTo<'_>) -> CallNow {
        if self.no_call_now {
            return CallNow::Later(req);
        }
        CallNow::Done(Ok(self.answer(req)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spend_depends_on_rounds_and_bytes() {
        assert_eq!(spend(b"abc", 0), 0xcbf2_9ce4_8422_2325);
        assert_ne!(spend(b"abc", 1), spend(b"abc", 2));
        assert_ne!(spend(b"abc", 1), spend(b"abd", 1));
    }

    #[test]
    fn served_sums_every_shard() {
        let s = Served::new(2);
        s.count(0);
        s.count(1);
        s.count(1);
        assert_eq!(s.total(), 3);
    }
}
