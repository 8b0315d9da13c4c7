//! Pieces the echo examples share (`echo_server`, `echo_client`, `echo_demo`), included by
//! each of them with `#[path]`. The framing state (`frame_reader`, `frame_batch`) is sans-I/O
//! and unit-tested; `connection` and `load` are the thin async shells around it.

// Each example uses a different part of this module.
#![allow(dead_code)]

pub mod args;
pub mod connection;
pub mod frame_batch;
pub mod frame_reader;
pub mod load;
pub mod logging;
pub mod window;
