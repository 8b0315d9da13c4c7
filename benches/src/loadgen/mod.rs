//! Load generators for the raw length-prefixed echo protocol.

pub mod accept_storm;
pub mod cli;
pub mod closed_loop;
pub mod echo_conn;
pub mod harness;
