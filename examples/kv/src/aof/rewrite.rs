//! AOF rewrite bookkeeping without I/O: when to rewrite by growth (Redis's
//! `auto-aof-rewrite-percentage` and `auto-aof-rewrite-min-size`), the buffer the image is
//! framed into, and the numbers INFO reports.
//!
//! # How the glue drives a rewrite (per shard, `server/aof_rewrite.rs`)
//! ```text
//! 1. create the next incremental file and the base file; write the manifest
//!    [old files..., new incr] (temp file, fsync, rename, fsync the directory)
//! 2. in one synchronous step: writer.begin_next_file(); store.snapshot_begin()
//!    (every record from here on goes to the new incr; the image is the keyspace now)
//! 3. until the snapshot is finished: store.snapshot_step(now, keys, &mut image), and before
//!    each write: for_each_image_key(cmd, |k| store.snapshot_touch(k, now, &mut image));
//!    write image.take() to the base file through the ring, yielding between steps
//! 4. fsync the base; write the manifest [base, new incr]; fsync the directory
//! 5. remove the files the manifest no longer names
//! ```
//! A crash before 4's rename replays the old files plus the new incr; after it, the base plus
//! the new incr. Either way every acknowledged write is there.

use bytes::{Bytes, BytesMut};

use super::record::encode_record_with;
use super::writer::AofError;
use crate::change::{ChangeSink, WriteOp};

/// Redis's defaults: rewrite when the log has doubled since the last rewrite and is over
/// 64 MiB.
pub const DEFAULT_REWRITE_PERCENTAGE: u64 = 100;
pub const DEFAULT_REWRITE_MIN_SIZE: u64 = 64 << 20;

/// When a shard rewrites its log by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewritePolicy {
    /// Growth over the size after the last rewrite (or at start-up), in percent, that starts
    /// a rewrite; 0 turns automatic rewrites off.
    pub percentage: u64,
    /// No automatic rewrite below this size.
    pub min_size: u64,
}

impl Default for RewritePolicy {
    fn default() -> Self {
        RewritePolicy {
            percentage: DEFAULT_REWRITE_PERCENTAGE,
            min_size: DEFAULT_REWRITE_MIN_SIZE,
        }
    }
}

impl RewritePolicy {
    /// Whether a log of `current` bytes, `base` after its last rewrite, should be rewritten.
    pub fn due(&self, current: u64, base: u64) -> bool {
        if self.percentage == 0 || current <= self.min_size {
            return false;
        }
        let base = base.max(1);
        let growth = (current as u128 * 100 / base as u128).saturating_sub(100);
        growth >= self.percentage as u128
    }
}

/// One shard's persistence numbers for INFO, named as Redis names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AofStats {
    pub enabled: bool,
    /// Bytes of all the shard's log files, including what is appended but not yet written.
    pub current_size: u64,
    /// `current_size` after the last rewrite, or at start-up.
    pub base_size: u64,
    /// Appended bytes not yet handed to a write.
    pub buffer_length: u64,
    pub rewrite_in_progress: bool,
    /// Rewrites completed since start-up.
    pub rewrites: u64,
    pub rewrites_consecutive_failures: u64,
    pub last_rewrite_ok: bool,
    /// Seconds the last rewrite took (-1: none yet).
    pub last_rewrite_time_sec: i64,
    /// Seconds the rewrite in progress has run (-1: none).
    pub current_rewrite_time_sec: i64,
    /// Whether the last write or fsync succeeded.
    pub last_write_ok: bool,
}

impl Default for AofStats {
    /// A shard without a log (or before anything happened): Redis's values for that.
    fn default() -> Self {
        AofStats {
            enabled: false,
            current_size: 0,
            base_size: 0,
            buffer_length: 0,
            rewrite_in_progress: false,
            rewrites: 0,
            rewrites_consecutive_failures: 0,
            last_rewrite_ok: true,
            last_rewrite_time_sec: -1,
            current_rewrite_time_sec: -1,
            last_write_ok: true,
        }
    }
}

impl AofStats {
    /// Field count of [`Self::to_integers`].
    pub const FIELDS: usize = 11;

    pub fn to_integers(&self) -> [i64; Self::FIELDS] {
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        [
            i64::from(self.enabled),
            int(self.current_size),
            int(self.base_size),
            int(self.buffer_length),
            i64::from(self.rewrite_in_progress),
            int(self.rewrites),
            int(self.rewrites_consecutive_failures),
            i64::from(self.last_rewrite_ok),
            self.last_rewrite_time_sec,
            self.current_rewrite_time_sec,
            i64::from(self.last_write_ok),
        ]
    }

    pub fn from_integers(v: &[i64]) -> Option<AofStats> {
        let [enabled, current, base, buffer, in_progress, rewrites, failures, last_ok, last_time, current_time, write_ok] =
            *v
        else {
            return None;
        };
        let uint = |v: i64| u64::try_from(v).ok();
        Some(AofStats {
            enabled: enabled != 0,
            current_size: uint(current)?,
            base_size: uint(base)?,
            buffer_length: uint(buffer)?,
            rewrite_in_progress: in_progress != 0,
            rewrites: uint(rewrites)?,
            rewrites_consecutive_failures: uint(failures)?,
            last_rewrite_ok: last_ok != 0,
            last_rewrite_time_sec: last_time,
            current_rewrite_time_sec: current_time,
            last_write_ok: write_ok != 0,
        })
    }
}

/// The records of a rewrite's image, framed as in any log file, waiting to be written.
#[derive(Debug, Default)]
pub struct ImageBuffer {
    buf: BytesMut,
    /// Bytes framed so far, written or not.
    total: u64,
    failure: Option<AofError>,
}

impl ImageBuffer {
    /// Takes everything framed so far, to be written at the end of the base file.
    pub fn take(&mut self) -> Bytes {
        self.buf.split().freeze()
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Set if a record could not be framed: the image is incomplete and must not be used.
    pub fn failure(&self) -> Option<&AofError> {
        self.failure.as_ref()
    }
}

impl ChangeSink for ImageBuffer {
    fn record(&mut self, op: WriteOp<'_>) {
        match encode_record_with(&mut self.buf, |out| op.encode(out)) {
            Ok(len) => self.total += len as u64,
            Err(payload_len) => {
                self.failure
                    .get_or_insert(AofError::RecordTooLarge { payload_len });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aof::replay;

    #[test]
    fn rewrites_by_growth_as_redis_does() {
        let policy = RewritePolicy::default();
        assert!(!policy.due(64 << 20, 1), "not above the minimum size");
        assert!(policy.due((64 << 20) + 1, 1));
        assert!(!policy.due(199 << 20, 100 << 20), "grown 99%");
        assert!(policy.due(200 << 20, 100 << 20), "grown 100%");
        let off = RewritePolicy {
            percentage: 0,
            min_size: 0,
        };
        assert!(!off.due(u64::MAX, 1));
        let small = RewritePolicy {
            percentage: 50,
            min_size: 1000,
        };
        assert!(small.due(1500, 0), "no base counts as 1 byte");
        assert!(small.due(3000, 2000));
        assert!(!small.due(2999, 2000));
    }

    #[test]
    fn the_image_is_framed_like_a_log() {
        let mut image = ImageBuffer::default();
        image.record(WriteOp::Set {
            key: b"k",
            value: b"v",
            ttl: crate::change::LoggedTtl::At(5),
        });
        image.record(WriteOp::Append {
            key: b"k",
            value: b"w",
        });
        let total = image.total();
        let bytes = image.take();
        assert_eq!(bytes.len() as u64, total);
        assert!(image.is_empty());
        let replayed = replay(bytes);
        assert_eq!(replayed.corrupt_tail, None);
        assert_eq!(replayed.commands.len(), 2);
    }

    #[test]
    fn stats_round_trip() {
        let stats = AofStats {
            enabled: true,
            current_size: 10,
            base_size: 5,
            buffer_length: 1,
            rewrite_in_progress: true,
            rewrites: 3,
            rewrites_consecutive_failures: 1,
            last_rewrite_ok: false,
            last_rewrite_time_sec: -1,
            current_rewrite_time_sec: 2,
            last_write_ok: true,
        };
        assert_eq!(AofStats::from_integers(&stats.to_integers()), Some(stats));
        assert_eq!(AofStats::from_integers(&[1, 2]), None);
    }
}
