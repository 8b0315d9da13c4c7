//! Append-only log, one per shard: framing, a sans-I/O writer with fsync policy and group
//! commit bookkeeping, replay that finds where a torn or corrupted tail begins, the rules for
//! what start-up may cut off, and the pieces of a rewrite: the [`Manifest`] of a shard's files
//! (a base and incremental files, as Redis 7), the writer's switch to a new file, the growth
//! policy, the image buffer and INFO's numbers (see `rewrite.rs` for the steps).
//!
//! # File format
//! Every file (base or incremental) is a sequence of records `[u32 LE payload length][u32 LE CRC32C of payload][payload]`, where
//! the payload is one write as a RESP request array (`SET k v PXAT 1700000000000`, `DEL k`,
//! ...; see [`crate::change::WriteOp`]). Relative times are logged as absolute ones and
//! expirations as DELs, so replaying with expiry disabled reproduces the keyspace exactly.
//!
//! # How the glue drives it (per shard)
//! ```text
//! start-up:  data = read file; r = replay(data)
//!            if let Some(tail) = r.corrupt_tail {
//!                match policy.recovery(tail.damage) {
//!                    Cut => { log it; truncate the file to r.valid_len }
//!                    Refuse => fail, naming the file, tail.offset and the flag to cut it
//!                }
//!            }
//!            for c in r.commands { store.apply_replayed(c) }
//!            aof = AofWriter::new(policy, r.valid_len as u64, now_ms)
//! admit:     refuse a write if payload_bound(&cmd) exceeds the record limit (before routing)
//! execute:   let reply = store.execute(cmd, now, &mut aof);        // records appended
//!            let lsn = aof.appended_lsn();
//!            if aof.must_hold_reply(lsn) { gate.hold(lsn, (origin, reply)) } else { send reply }
//! each loop iteration (after the ready commands ran; this is the group commit):
//!            if let Some(batch) = aof.take_batch() { submit pwrite(batch.bytes at batch.offset) }
//! write done (resubmit the rest yourself on a short write):
//!            aof.write_completed(batch.end())?;  then check fsync_due below
//! fsync_due: if aof.fsync_due(now) { let t = aof.start_fsync(now)?; submit fdatasync }
//!            (also from a timer every ~100 ms for everysec)
//! fsync done: let durable = aof.fsync_completed(t);
//!            for (origin, reply) in gate.release(durable) { send reply }
//! ```
//! With `always`, a write's reply leaves only after its record is on disk; every command that
//! ran in the same loop iteration shares one write and one fsync. With `everysec` and `no`,
//! replies are not held (as in Redis); `everysec` bounds loss to about one second.
//! If [`AofWriter::failure`] is set, stop accepting writes (Redis refuses writes on AOF errors).

mod footprint;
mod gate;
mod manifest;
pub(crate) mod record;
mod recovery;
mod replay;
mod rewrite;
mod writer;

pub use footprint::{for_each_image_key, payload_bound};
pub use gate::DurabilityGate;
pub use manifest::{is_log_file_of, BadManifest, Manifest};
pub use record::{encode_record, MAX_PAYLOAD_LEN, RECORD_HEADER_LEN};
pub use recovery::{LoadPolicy, Recovery};
pub use replay::{replay, CorruptReason, CorruptTail, Damage, RecordReader, Replay};
pub use rewrite::{
    AofStats, ImageBuffer, RewritePolicy, DEFAULT_REWRITE_MIN_SIZE, DEFAULT_REWRITE_PERCENTAGE,
};
pub use writer::{
    AofError, AofWriter, FsyncPolicy, FsyncTicket, Lsn, UnknownFsyncPolicy, WriteBatch,
};
