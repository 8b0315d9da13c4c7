//! corewire's sharded, Redis-compatible key-value server.
//!
//! Most modules are a sans-I/O core: plain state machines with no sockets, files or clocks
//! (`session`, `resp`, `command`, `routing`, `store`, `aof`'s record format and replay, ...).
//! The I/O glue lives in [`server`] (connections, cross-shard forwarding, AOF files through the
//! ring) and [`kv_client`]; it drives the core like this, per shard thread:
//!
//! 1. Bytes read from a connection go into [`session::Session::feed`] (or straight into
//!    [`session::Session::input_buffer`]). [`session::Session::next_request`] yields
//!    [`session::Request`]s tagged with a sequence number; connection-level commands (PING,
//!    AUTH, QUIT, SELECT, CONFIG GET, COMMAND, CLIENT but LIST and KILL, errors) are answered
//!    inside the session.
//! 2. Each request goes through [`routing::route`]: a [`routing::Route::Single`] names the one
//!    shard whose [`store::Store`] executes it; a [`routing::Route::FanOut`] lists per-shard
//!    parts plus a [`routing::Merger`] that folds the part replies into the client's reply.
//!    Parts for other shards travel as cross-shard messages (`Command` out, `Reply` back).
//! 3. The owning shard calls [`store::Store::execute`] with its own `now_ms`; writes are
//!    reported to a [`change::ChangeSink`], which is the shard's [`aof::AofWriter`] when
//!    persistence is on.
//! 4. Replies come back (in any order) through [`session::Session::complete`]; the session
//!    emits reply bytes strictly in request order via [`session::Session::take_output`].
//!
//! In cluster mode ([`cluster`]) a node owns hash slots and redirects the others; the check
//! runs on the connection and again on the shard that owns the slot.
//!
//! [`aof::replay`] rebuilds a shard from its log at start-up; [`info::render`] builds INFO.
//!
//! The glue itself is [`server`] (shards, connections, cross-shard batches, AOF I/O, expiry),
//! [`binary`] (the flatbuffers protocol served through corewire's service framework) and
//! [`kv_client`] (its client and load generator). Binaries: `corewire-kv` and `kv-client`.

pub mod acl;
pub mod aof;
pub mod binary;
pub mod blocking;
pub mod change;
pub mod clients;
pub mod cluster;
pub mod command;
pub mod config;
mod glob;
pub mod heap;
pub mod hyperloglog;
pub mod info;
pub mod introspect;
pub mod kv_client;
pub mod notify;
mod number;
pub mod rdb;
pub mod repl;
pub mod reply;
pub mod resp;
pub mod routing;
pub mod scripting;
pub mod server;
pub mod session;
pub mod store;

pub use command::{Command, CommandError};
pub use reply::Reply;
