//! Fixtures shared by the socket tests: a reference length-prefixed echo service, blocking
//! framed clients, and process-level probes (open fds, shard threads) with polling helpers.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

pub mod client;
pub mod echo;
pub mod process;

use corewire_runtime::Runtime;

/// An unpinned runtime: several test binaries run at once on a small machine.
pub fn runtime(shards: usize) -> Runtime {
    Runtime::builder()
        .shards(shards)
        .pin(false)
        .build()
        .expect("runtime")
}
