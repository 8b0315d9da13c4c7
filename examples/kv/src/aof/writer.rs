use std::fmt;
use std::str::FromStr;

use bytes::{Bytes, BytesMut};

use super::record::{encode_record, encode_record_with, RECORD_HEADER_LEN};
use super::replay::{EXEC_PAYLOAD, MULTI_PAYLOAD};
use crate::change::{ChangeSink, WriteOp};

/// A position in the AOF: the file offset just past a record. Record `r` is durable once the
/// durable LSN is at least `r`'s LSN.
pub type Lsn = u64;

/// Redis's `appendfsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// fsync before any reply to a write is released (group-committed per loop iteration).
    Always,
    /// fsync at most once a second; replies are not held.
    EverySec,
    /// Never fsync; the kernel flushes when it likes.
    No,
}

impl FsyncPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::EverySec => "everysec",
            FsyncPolicy::No => "no",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFsyncPolicy(pub String);

impl fmt::Display for UnknownFsyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown appendfsync policy {:?} (always, everysec or no)",
            self.0
        )
    }
}

impl std::error::Error for UnknownFsyncPolicy {}

impl FromStr for FsyncPolicy {
    type Err = UnknownFsyncPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(FsyncPolicy::Always),
            "everysec" => Ok(FsyncPolicy::EverySec),
            "no" => Ok(FsyncPolicy::No),
            _ => Err(UnknownFsyncPolicy(s.to_owned())),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AofError {
    /// A write's payload exceeded the 32-bit record length; it was not logged.
    RecordTooLarge { payload_len: usize },
    /// `write_completed` named a batch that is not the one in flight.
    UnexpectedWriteCompletion { end: Lsn, in_flight: Option<Lsn> },
}

impl fmt::Display for AofError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AofError::RecordTooLarge { payload_len } => {
                write!(
                    f,
                    "AOF record of {payload_len} bytes exceeds the 4 GiB record limit"
                )
            }
            AofError::UnexpectedWriteCompletion { end, in_flight } => {
                write!(
                    f,
                    "write completion up to {end}, but in flight: {in_flight:?}"
                )
            }
        }
    }
}

impl std::error::Error for AofError {}

/// Bytes to write at `offset` of the current AOF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteBatch {
    /// Offset in the current file.
    pub offset: u64,
    /// LSN of the first byte.
    pub lsn: Lsn,
    pub bytes: Bytes,
}

impl WriteBatch {
    /// The LSN the log reaches once this batch is fully written.
    pub fn end(&self) -> Lsn {
        self.lsn + self.bytes.len() as u64
    }
}

/// An fsync in flight, covering everything written when it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "pass the ticket to fsync_completed when the fsync finishes"]
pub struct FsyncTicket {
    covers: Lsn,
}

impl FsyncTicket {
    pub fn covers(&self) -> Lsn {
        self.covers
    }
}

/// One shard's AOF, without I/O: records accumulate in memory, the glue writes them in batches
/// (one write in flight at a time, so the written prefix is contiguous) and fsyncs when
/// [`Self::fsync_due`] says so (one fsync in flight at a time).
///
/// LSNs count bytes over the whole log, across files: a rewrite moves appending to a new file
/// at a point the glue chooses ([`Self::begin_next_file`]); batches never span it, and the
/// old file is synced before the first batch goes to the new one.
#[derive(Debug)]
pub struct AofWriter {
    policy: FsyncPolicy,
    pending: BytesMut,
    appended: Lsn,
    write_in_flight: Option<Lsn>,
    written: Lsn,
    fsync_in_flight: Option<Lsn>,
    durable: Lsn,
    last_fsync_ms: u64,
    failure: Option<AofError>,
    /// LSN of the current file's first byte.
    file_start: Lsn,
    /// Where the next file begins, once asked for and until the switch is done.
    next_file_at: Option<Lsn>,
    /// A transaction's block: see [`Self::begin_block`].
    block: Block,
}

/// Whether records are being grouped into a transaction's block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    None,
    /// Begun; MULTI goes in before the first record (a block that logs nothing logs no
    /// markers either).
    Begun,
    /// MULTI is in the log; EXEC closes it.
    Open,
}

/// `everysec`'s interval.
const EVERYSEC_INTERVAL_MS: u64 = 1000;

impl AofWriter {
    /// `file_len`: the existing file's valid length (after truncating a corrupt tail), all of
    /// which is taken to be durable.
    pub fn new(policy: FsyncPolicy, file_len: u64, now_ms: u64) -> AofWriter {
        AofWriter {
            policy,
            pending: BytesMut::new(),
            appended: file_len,
            write_in_flight: None,
            written: file_len,
            fsync_in_flight: None,
            durable: file_len,
            last_fsync_ms: now_ms,
            failure: None,
            file_start: 0,
            next_file_at: None,
            block: Block::None,
        }
    }

    pub fn policy(&self) -> FsyncPolicy {
        self.policy
    }

    /// Group the records appended until [`Self::end_block`] into one transaction block
    /// (MULTI ... EXEC), which replay applies all or nothing: a shard calls this around the
    /// part of a MULTI/EXEC it runs. Begin and end in the same synchronous stretch of the
    /// shard (no await between): no batch is taken in between, so a batch boundary, and with
    /// it a durable point, never falls inside a block.
    pub fn begin_block(&mut self) {
        debug_assert_eq!(self.block, Block::None, "nested transaction block");
        self.block = Block::Begun;
    }

    /// Close the block [`Self::begin_block`] opened (EXEC, if anything was logged in it).
    pub fn end_block(&mut self) {
        if self.block == Block::Open {
            self.append_raw(EXEC_PAYLOAD);
        }
        self.block = Block::None;
    }

    fn append_raw(&mut self, payload: &[u8]) {
        if encode_record(&mut self.pending, payload) {
            self.appended += (RECORD_HEADER_LEN + payload.len()) as u64;
        }
    }

    /// Appends a record for `op`; returns its LSN.
    pub fn append(&mut self, op: WriteOp<'_>) -> Lsn {
        if self.block == Block::Begun {
            self.block = Block::Open;
            self.append_raw(MULTI_PAYLOAD);
        }
        match encode_record_with(&mut self.pending, |out| op.encode(out)) {
            Ok(len) => self.appended += len as u64,
            Err(payload_len) => {
                self.failure
                    .get_or_insert(AofError::RecordTooLarge { payload_len });
            }
        }
        self.appended
    }

    /// LSN of the last appended record.
    pub fn appended_lsn(&self) -> Lsn {
        self.appended
    }

    pub fn written_lsn(&self) -> Lsn {
        self.written
    }

    pub fn durable_lsn(&self) -> Lsn {
        self.durable
    }

    /// Set once a write could not be logged: the log no longer matches memory.
    pub fn failure(&self) -> Option<&AofError> {
        self.failure.as_ref()
    }

    /// Whether the reply to a write logged at `lsn` must wait for [`DurabilityGate`]
    /// release. Only `always` holds replies.
    ///
    /// [`DurabilityGate`]: super::DurabilityGate
    pub fn must_hold_reply(&self, lsn: Lsn) -> bool {
        self.policy == FsyncPolicy::Always && lsn > self.durable
    }

    /// Bytes appended but not yet handed out in a batch.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Everything appended since the last batch (up to a pending file switch), unless a write
    /// is still in flight (then the records keep accumulating and go out together next time)
    /// or the switch is due first.
    pub fn take_batch(&mut self) -> Option<WriteBatch> {
        debug_assert_ne!(
            self.block,
            Block::Open,
            "batch taken inside a transaction block"
        );
        if self.write_in_flight.is_some() || self.pending.is_empty() {
            return None;
        }
        let mut len = self.pending.len();
        if let Some(at) = self.next_file_at {
            if self.written >= at {
                return None;
            }
            len = len.min((at - self.written) as usize);
        }
        let bytes = self.pending.split_to(len).freeze();
        let batch = WriteBatch {
            offset: self.written - self.file_start,
            lsn: self.written,
            bytes,
        };
        self.write_in_flight = Some(batch.end());
        Some(batch)
    }

    /// Records appended from now on go to a new file; returns the LSN where it begins. The
    /// glue must have the new file ready (and named in the manifest) before calling this.
    /// `None` if a switch is already pending.
    pub fn begin_next_file(&mut self) -> Option<Lsn> {
        if self.next_file_at.is_some() {
            return None;
        }
        self.next_file_at = Some(self.appended);
        self.next_file_at
    }

    /// Whether everything before the switch point is written and nothing is in flight: the
    /// glue now syncs the old file ([`Self::start_switch_fsync`]) and moves to the new one.
    pub fn switch_due(&self) -> bool {
        self.next_file_at == Some(self.written)
            && self.write_in_flight.is_none()
            && self.fsync_in_flight.is_none()
    }

    /// The fsync of the old file at a switch, whatever the policy: the old file is complete
    /// and durable before anything goes to the new one.
    pub fn start_switch_fsync(&mut self, now_ms: u64) -> Option<FsyncTicket> {
        if !self.switch_due() {
            return None;
        }
        self.fsync_in_flight = Some(self.written);
        self.last_fsync_ms = now_ms;
        Some(FsyncTicket {
            covers: self.written,
        })
    }

    /// The old file is synced; batches now go to the new file, from its offset 0.
    pub fn switch_completed(&mut self) {
        if let Some(at) = self.next_file_at.take() {
            self.file_start = at;
        }
    }

    /// Nothing appended is waiting to be written, no write is in flight and no switch is
    /// pending: everything appended is in the current file (maybe not synced).
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.write_in_flight.is_none() && self.next_file_at.is_none()
    }

    /// Whether a switch to a new file was asked for and is not done yet.
    pub fn switch_pending(&self) -> bool {
        self.next_file_at.is_some()
    }

    /// LSN of the current file's first byte (the file's length is `written - file_start`
    /// once everything is written).
    pub fn file_start(&self) -> Lsn {
        self.file_start
    }

    /// The batch ending at `end` is completely in the file (page cache).
    pub fn write_completed(&mut self, end: Lsn) -> Result<(), AofError> {
        if self.write_in_flight != Some(end) {
            return Err(AofError::UnexpectedWriteCompletion {
                end,
                in_flight: self.write_in_flight,
            });
        }
        self.write_in_flight = None;
        self.written = end;
        Ok(())
    }

    /// Whether to issue an fsync now: there are written but not durable bytes, no fsync is in
    /// flight, and the policy asks for one (`always`: immediately; `everysec`: a second after
    /// the previous one; `no`: never).
    pub fn fsync_due(&self, now_ms: u64) -> bool {
        if self.fsync_in_flight.is_some() || self.written <= self.durable {
            return false;
        }
        if self.switch_due() {
            // The switch's own fsync covers it.
            return false;
        }
        match self.policy {
            FsyncPolicy::Always => true,
            FsyncPolicy::EverySec => {
                now_ms.saturating_sub(self.last_fsync_ms) >= EVERYSEC_INTERVAL_MS
            }
            FsyncPolicy::No => false,
        }
    }

    /// Starts an fsync if one is due. It covers what has been written so far; records written
    /// while it runs wait for the next one.
    pub fn start_fsync(&mut self, now_ms: u64) -> Option<FsyncTicket> {
        if !self.fsync_due(now_ms) {
            return None;
        }
        self.fsync_in_flight = Some(self.written);
        self.last_fsync_ms = now_ms;
        Some(FsyncTicket {
            covers: self.written,
        })
    }

    /// Records a finished fsync; returns the new durable LSN for [`DurabilityGate::release`].
    ///
    /// [`DurabilityGate::release`]: super::DurabilityGate::release
    pub fn fsync_completed(&mut self, ticket: FsyncTicket) -> Lsn {
        if self.fsync_in_flight == Some(ticket.covers) {
            self.fsync_in_flight = None;
        }
        self.durable = self.durable.max(ticket.covers);
        self.durable
    }
}

impl ChangeSink for AofWriter {
    fn record(&mut self, op: WriteOp<'_>) {
        self.append(op);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(writer: &mut AofWriter) -> Lsn {
        writer.append(WriteOp::Set {
            key: b"k",
            value: b"v",
            ttl: crate::change::LoggedTtl::None,
        })
    }

    #[test]
    fn always_group_commits_and_releases_by_lsn() {
        let mut aof = AofWriter::new(FsyncPolicy::Always, 100, 0);
        let first = set(&mut aof);
        let second = set(&mut aof);
        assert!(first > 100 && second > first);
        assert!(aof.must_hold_reply(first));
        assert!(!aof.fsync_due(0), "nothing written yet");

        let batch = aof.take_batch().unwrap();
        assert_eq!(batch.offset, 100);
        assert_eq!(batch.end(), second);
        assert_eq!(aof.take_batch(), None, "one write in flight at a time");
        let third = set(&mut aof);

        aof.write_completed(batch.end()).unwrap();
        let ticket = aof.start_fsync(0).unwrap();
        assert_eq!(ticket.covers(), second);
        assert!(
            aof.start_fsync(0).is_none(),
            "one fsync in flight at a time"
        );

        // The third record is written while the fsync runs; the fsync does not cover it.
        let batch = aof.take_batch().unwrap();
        aof.write_completed(batch.end()).unwrap();
        assert_eq!(aof.fsync_completed(ticket), second);
        assert!(!aof.must_hold_reply(second));
        assert!(aof.must_hold_reply(third));

        let ticket = aof.start_fsync(0).unwrap();
        assert_eq!(aof.fsync_completed(ticket), third);
        assert!(!aof.fsync_due(0));
    }

    #[test]
    fn everysec_waits_a_second_and_holds_nothing() {
        let mut aof = AofWriter::new(FsyncPolicy::EverySec, 0, 5_000);
        let lsn = set(&mut aof);
        assert!(!aof.must_hold_reply(lsn));
        let batch = aof.take_batch().unwrap();
        aof.write_completed(batch.end()).unwrap();
        assert!(!aof.fsync_due(5_500));
        assert!(aof.fsync_due(6_000));
        let ticket = aof.start_fsync(6_000).unwrap();
        assert_eq!(aof.fsync_completed(ticket), lsn);
        set(&mut aof);
        let batch = aof.take_batch().unwrap();
        aof.write_completed(batch.end()).unwrap();
        assert!(!aof.fsync_due(6_999));
        assert!(aof.fsync_due(7_000));
    }

    #[test]
    fn no_never_fsyncs() {
        let mut aof = AofWriter::new(FsyncPolicy::No, 0, 0);
        let lsn = set(&mut aof);
        let batch = aof.take_batch().unwrap();
        aof.write_completed(batch.end()).unwrap();
        assert_eq!(aof.written_lsn(), lsn);
        assert!(!aof.fsync_due(u64::MAX));
        assert!(!aof.must_hold_reply(lsn));
    }

    #[test]
    fn wrong_write_completion_is_reported() {
        let mut aof = AofWriter::new(FsyncPolicy::Always, 0, 0);
        assert!(aof.write_completed(10).is_err());
        set(&mut aof);
        let batch = aof.take_batch().unwrap();
        assert_eq!(
            aof.write_completed(batch.end() - 1),
            Err(AofError::UnexpectedWriteCompletion {
                end: batch.end() - 1,
                in_flight: Some(batch.end())
            })
        );
        assert!(aof.write_completed(batch.end()).is_ok());
    }

    #[test]
    fn a_switch_splits_batches_and_syncs_the_old_file_first() {
        for policy in [FsyncPolicy::Always, FsyncPolicy::EverySec, FsyncPolicy::No] {
            let mut aof = AofWriter::new(policy, 50, 0);
            let before = set(&mut aof);
            let at = aof.begin_next_file().unwrap();
            assert_eq!(at, before);
            assert_eq!(aof.begin_next_file(), None, "one switch at a time");
            let after = set(&mut aof);

            // The old file gets exactly the records appended before the switch point.
            let batch = aof.take_batch().unwrap();
            assert_eq!((batch.offset, batch.lsn, batch.end()), (50, 50, at));
            assert!(!aof.switch_due(), "write in flight");
            aof.write_completed(batch.end()).unwrap();
            assert_eq!(aof.take_batch(), None, "nothing goes to the new file yet");
            assert!(aof.switch_due());
            assert!(!aof.fsync_due(u64::MAX));
            let ticket = aof.start_switch_fsync(0).unwrap();
            assert_eq!(aof.fsync_completed(ticket), at, "{policy:?}");
            aof.switch_completed();
            assert!(!aof.switch_pending());

            // The new file starts at offset 0 with the records appended after the switch.
            let batch = aof.take_batch().unwrap();
            assert_eq!((batch.offset, batch.lsn, batch.end()), (0, at, after));
            aof.write_completed(batch.end()).unwrap();
            assert_eq!(aof.file_start(), at);
            assert_eq!(aof.must_hold_reply(after), policy == FsyncPolicy::Always);
        }
    }

    #[test]
    fn a_switch_with_nothing_pending_is_due_at_once() {
        let mut aof = AofWriter::new(FsyncPolicy::EverySec, 10, 0);
        assert_eq!(aof.begin_next_file(), Some(10));
        assert!(aof.switch_due());
        let ticket = aof.start_switch_fsync(0).unwrap();
        aof.fsync_completed(ticket);
        aof.switch_completed();
        set(&mut aof);
        assert_eq!(aof.take_batch().unwrap().offset, 0);
    }

    #[test]
    fn policies_parse() {
        assert_eq!("EverySec".parse(), Ok(FsyncPolicy::EverySec));
        assert_eq!("always".parse(), Ok(FsyncPolicy::Always));
        assert_eq!("no".parse(), Ok(FsyncPolicy::No));
        assert!("sometimes".parse::<FsyncPolicy>().is_err());
        assert_eq!(FsyncPolicy::EverySec.as_str(), "everysec");
    }
}
