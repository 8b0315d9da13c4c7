//! Writing a save's file from its coordinator: appends with one batch of writes in flight
//! while the shards encode the next slices, and a checksum that gives way to the shard's
//! waiting work (`walk_pace.rs`) as the walk does.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use bytes::Bytes;
use corewire::runtime::fs::File;

use crate::rdb::crc64;

/// Bytes checksummed between two looks at the shard's waiting work.
const CRC_CHUNK: usize = 32 << 10;

/// `crc` updated with `bytes` (CRC-64), in chunks between which the shard's waiting work
/// runs: a walk step's slice takes tens of microseconds to checksum.
pub(crate) async fn checksum(mut crc: u64, bytes: &[u8]) -> u64 {
    for chunk in bytes.chunks(CRC_CHUNK) {
        crc = crc64::update(crc, chunk);
        if corewire::runtime::work_waiting() {
            corewire::runtime::yield_now().await;
        }
    }
    crc
}

/// Runs two futures at once; both outputs once both are done.
pub(super) async fn both<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let mut a = std::pin::pin!(a);
    let mut b = std::pin::pin!(b);
    let (mut out_a, mut out_b) = (None, None);
    std::future::poll_fn(|cx| {
        if out_a.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                out_a = Some(v);
            }
        }
        if out_b.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                out_b = Some(v);
            }
        }
        if out_a.is_some() && out_b.is_some() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    match (out_a, out_b) {
        (Some(a), Some(b)) => (a, b),
        _ => unreachable!("both futures finished"),
    }
}

/// Appends to the file with at most one batch of writes in flight: [`Self::write`] starts a
/// batch once the previous one is done, [`Self::settle`] waits for it.
pub(super) struct FileWriter<'a> {
    file: &'a File,
    /// Bytes appended (or in flight) so far.
    pub(super) offset: u64,
    /// CRC-64 of what [`Self::write`] appended so far.
    pub(super) crc: u64,
    in_flight: Option<Pin<Box<dyn Future<Output = std::io::Result<()>> + 'a>>>,
}

impl<'a> FileWriter<'a> {
    /// A writer appending to `file` from its start.
    pub(super) fn new(file: &'a File) -> FileWriter<'a> {
        FileWriter {
            file,
            offset: 0,
            crc: 0,
            in_flight: None,
        }
    }

    /// Checksums `batch` and starts writing it (after the batch in flight). The checksum
    /// gives way to the shard's waiting work between chunks, as the walk does.
    pub(super) async fn write(&mut self, batch: Vec<Bytes>) -> std::io::Result<()> {
        for bytes in &batch {
            self.crc = checksum(self.crc, bytes).await;
        }
        self.settle().await?;
        self.write_raw(batch);
        Ok(())
    }

    /// Starts writing `batch` unchecksummed; the caller settled the previous batch.
    pub(super) fn write_raw(&mut self, batch: Vec<Bytes>) {
        if batch.is_empty() {
            return;
        }
        let file = self.file;
        let mut offset = self.offset;
        self.offset += batch.iter().map(|b| b.len() as u64).sum::<u64>();
        self.in_flight = Some(Box::pin(async move {
            for bytes in batch {
                let len = bytes.len() as u64;
                file.write_all_at(bytes, offset).await?;
                offset += len;
            }
            Ok(())
        }));
    }

    /// Waits for the batch in flight.
    pub(super) async fn settle(&mut self) -> std::io::Result<()> {
        match self.in_flight.take() {
            Some(write) => write.await,
            None => Ok(()),
        }
    }
}
