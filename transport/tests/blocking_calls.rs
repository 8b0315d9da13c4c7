//! The RDMA transport's runtime-wide calls block the calling thread, so on a shard they panic
//! at once (no device needed: the check comes first), and their async forms run there.
#![cfg(feature = "rdma")]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use corewire_runtime::Runtime;
use corewire_transport::rdma::{self, PollerMode, RdmaConfig, RdmaEndpoint};

/// A blocking call under test, by the name its panic must give.
type Call = (&'static str, fn(&Runtime));

fn on_shard_panics(rt: &Arc<Runtime>, call: fn(&Runtime)) -> String {
    let inner = rt.clone();
    rt.run_on(0, move || async move {
        match catch_unwind(AssertUnwindSafe(|| call(&inner))) {
            Ok(()) => String::new(),
            Err(p) => p.downcast_ref::<String>().cloned().unwrap_or_default(),
        }
    })
    .unwrap()
}

#[test]
fn runtime_wide_rdma_calls_panic_on_a_shard() {
    let rt = Arc::new(Runtime::builder().shards(2).pin(false).build().unwrap());
    let calls: [Call; 6] = [
        ("rdma::install", |rt| {
            let _ = rdma::install(rt, RdmaConfig::default());
        }),
        ("rdma::set_mode", |rt| {
            let _ = rdma::set_mode(rt, PollerMode::Event);
        }),
        ("rdma::stats", |rt| {
            let _ = rdma::stats(rt);
        }),
        ("rdma::uninstall", rdma::uninstall),
        ("rdma::tcp_fallbacks", |rt| {
            let _ = rdma::tcp_fallbacks(rt);
        }),
        ("RdmaEndpoint::serve", |rt| {
            let addr = "127.0.0.1:0".parse().unwrap();
            let _ = RdmaEndpoint::bind(addr).serve(rt, |_accepted| async {});
        }),
    ];
    for (name, call) in calls {
        let msg = on_shard_panics(&rt, call);
        assert!(
            msg.starts_with("Cannot block the current thread from within a corewire shard"),
            "{name}: {msg:?}"
        );
        assert!(msg.contains(name), "{msg:?} should name {name}");
    }
}

/// The async forms answer from a shard for every shard (without a device: zero counters, and
/// `set_mode` says the transport is not installed).
#[test]
fn async_forms_run_on_a_shard() {
    let rt = Runtime::builder().shards(2).pin(false).build().unwrap();
    let (stats, fallbacks, set_mode) = rt
        .run_on(1, || async {
            let stats = rdma::stats_async().await;
            let fallbacks = rdma::tcp_fallbacks_async().await;
            let set_mode = rdma::set_mode_async(PollerMode::Event).await;
            rdma::uninstall_async().await;
            (stats.len(), fallbacks, set_mode.map_err(|e| e.to_string()))
        })
        .unwrap();
    assert_eq!(stats, 2);
    assert_eq!(fallbacks, vec![0, 0]);
    assert!(
        set_mode
            .as_ref()
            .is_err_and(|e| e.contains("not installed")),
        "{set_mode:?}"
    );
    // Off a shard the blocking forms still work.
    assert_eq!(rdma::stats(&rt).len(), 2);
}
