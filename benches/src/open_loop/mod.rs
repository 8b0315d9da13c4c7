//! Open-loop load (as wrk2): each connection sends at a fixed rate, and every request's
//! latency is measured from the time it was *meant* to be sent, so a stalled server is charged
//! for the requests it kept the client from sending (no coordinated omission).
//!
//! [`schedule`], [`replies`] and [`rpc_frames`] are sans-I/O (the send schedule, the latency
//! accounting, the request bytes and reply framing); [`driver`] is the socket glue, a
//! busy-polling thread.

pub mod driver;
pub mod replies;
pub mod rpc_frames;
pub mod schedule;
