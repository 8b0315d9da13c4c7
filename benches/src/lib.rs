//! Benchmark peers, load generators and the `benchctl` orchestrator for corewire.
//!
//! Everything runs on 127.0.0.1. On the 2-core development machine client and server share the
//! cores, and every report says so.
//!
//! Binaries (`src/bin`): `echo_tokio`, `echo_glommio`, `loadgen`, `rpc_tonic`, `rpc_corewire`,
//! `benchctl`, `kv_memory`, `openloop` (fixed-rate load, [`open_loop`]).

pub mod alloc_count;
pub mod benchctl;
pub mod byte_queue;
pub mod corewire_rpc;
pub mod cpu;
pub mod echo_buffer;
pub mod frame;
pub mod latency;
pub mod loadgen;
pub mod open_loop;
pub mod pipeline;
pub mod report;
pub mod rpc;
pub mod server_metrics;
pub mod servers;
pub mod stats_line;
pub mod syscalls;
