//! The large-message path of an RDMA connection (see [`super::super::large`]): a part at
//! least `RdmaConfig::large_message_threshold` long, or one of a `RegisteredBuf`, goes as a
//! descriptor and the peer pulls it with an RDMA READ, then sends a "done" that releases our
//! registration. The tables (what we lent, where the peer's messages stand in our stream)
//! are sans-I/O in `large/`; this file registers memory, posts the READs and control
//! messages, and feeds completions back.

use std::cell::RefCell;
use std::collections::HashMap;

use bytes::Bytes;
use corewire_runtime::sync::WakerCell;
use corewire_verbs::{Access, MemoryRegion, SendOp, SendWr};

use super::super::large::control::{self, Descriptor, Record, DESCRIPTOR_LEN, DONE_LEN};
use super::super::large::incoming::Incoming;
use super::super::large::outgoing::{Outgoing, ID_MASK};
use super::super::large::registered::{user_region, Held, Tracked};
use super::super::wr_id::WrKind;
use super::super::RdmaConfig;
use super::lifecycle::{Failure, Posting};
use super::writer::Ended;
use super::ConnCore;

/// The large-message state of one connection.
pub(super) struct Large {
    /// Parts of at least this many bytes go by descriptor.
    threshold: Option<usize>,
    /// What we sent by descriptor, registered until the peer's "done".
    outgoing: RefCell<Outgoing<Held>>,
    /// Where the peer's large messages stand in our stream, and their assembly into frames.
    pub(super) incoming: RefCell<Incoming>,
    /// Our RDMA READs in flight, by the peer's id: the buffers they fill.
    reads: RefCell<HashMap<u32, Tracked>>,
    /// "Done"s owed to the peer (sent by the writer task, which `control_waker` wakes).
    dones: RefCell<Vec<u32>>,
    pub(super) control_waker: WakerCell,
}

impl Large {
    pub(super) fn new(config: &RdmaConfig) -> Large {
        let in_flight = config.large_in_flight as usize;
        Large {
            threshold: config.large_message_threshold.filter(|&t| t > 0),
            outgoing: RefCell::new(Outgoing::new(in_flight)),
            incoming: RefCell::new(Incoming::new(in_flight)),
            reads: RefCell::new(HashMap::new()),
            dones: RefCell::new(Vec::new()),
            control_waker: WakerCell::new(),
        }
    }

    /// "Done"s are owed to the peer.
    pub(super) fn owes_dones(&self) -> bool {
        !self.dones.borrow().is_empty()
    }

    /// The peer still reads something of ours.
    pub(super) fn lent(&self) -> bool {
        !self.outgoing.borrow().is_empty()
    }

    /// Our RDMA READs are in flight.
    pub(super) fn reading(&self) -> bool {
        !self.reads.borrow().is_empty()
    }

    /// The connection ended: deregister and free what we lent the peer and what we were
    /// reading (a read still in flight completes with an error, or not at all: the queue
    /// pair is on its way out).
    pub(super) fn release(&self) {
        drop(self.outgoing.borrow_mut().drain());
        self.reads.borrow_mut().clear();
        self.dones.borrow_mut().clear();
    }
}

impl ConnCore {
    /// Control records from the peer: descriptors to read, "done"s to release.
    pub(super) fn on_control(&self, records: Result<Vec<Record>, control::BadControl>) {
        let records = match records {
            Ok(r) => r,
            Err(e) => return self.fail(Failure::BadControl(e)),
        };
        let max_body = self.shard.config().limits.max_body_len;
        for record in records {
            match record {
                Record::Descriptor(d) => {
                    if d.id & !ID_MASK != 0 || d.len as usize > max_body {
                        return self.fail(Failure::BadDescriptor(d));
                    }
                    self.shard.stats.borrow_mut().large_received += 1;
                    let start = self.large.incoming.borrow_mut().descriptor(d);
                    if let Some(d) = start {
                        self.start_read(d);
                    }
                }
                Record::Done { id } => {
                    // Deregistered here (dropped); the writer may have been waiting for room.
                    if self.large.outgoing.borrow_mut().release(id).is_some() {
                        self.wake_writer();
                    }
                }
            }
        }
    }

    /// Register a buffer for large message `d` and RDMA READ it from the peer.
    pub(super) fn start_read(&self, d: Descriptor) {
        if self.is_ended() {
            return;
        }
        let len = d.len as usize;
        let buf = vec![0u8; len].into_boxed_slice();
        let mr = match MemoryRegion::from_boxed(&self.device.pd, buf, Access::LOCAL_WRITE) {
            Ok(mr) => mr,
            Err(error) => return self.fail(Failure::ReadRegistration { len, error }),
        };
        let tracked = Tracked::new(&self.shard, mr);
        let posted = match tracked.mr().sge(0, len) {
            Ok(sge) => {
                let wr = SendWr {
                    wr_id: self.wr(WrKind::Read, d.id),
                    sges: &[sge],
                    op: SendOp::RdmaRead {
                        remote_addr: d.addr,
                        rkey: d.rkey,
                    },
                    signaled: true,
                    solicited: false,
                    inline: false,
                };
                match self.qp_do(|qp| qp.post_send(&wr)) {
                    Some(posted) => posted,
                    None => return,
                }
            }
            Err(e) => Err(e),
        };
        match posted {
            Ok(()) => {
                self.large.reads.borrow_mut().insert(d.id, tracked);
            }
            Err(e) => self.fail(Failure::Post(Posting::Read, e)),
        }
    }

    /// A READ completed: its buffer, deregistered, is the large message (no copy).
    pub(super) fn read_completed(&self, id: u32) {
        let Some(tracked) = self.large.reads.borrow_mut().remove(&id) else {
            return;
        };
        let Some(data) = tracked.into_boxed() else {
            return;
        };
        self.large
            .incoming
            .borrow_mut()
            .read_done(id, Bytes::from(data));
        self.rx.ready.notify_one();
    }

    /// Whether `part` goes by descriptor: a part of a `RegisteredBuf`, or at least the
    /// threshold.
    pub(super) fn is_large(&self, part: &Bytes) -> bool {
        self.large.threshold.is_some_and(|t| part.len() >= t)
            || user_region(&self.shard.user_regions, &self.device, part).is_some()
    }

    /// Send `part` by descriptor: wait for room in the table, register it (or use its
    /// `RegisteredBuf`'s registration) and send the descriptor. `Ok(false)`: registering
    /// failed, send it by copy instead.
    pub(super) async fn send_large(&self, part: &Bytes) -> Result<bool, Ended> {
        loop {
            if self.is_ended() {
                return Err(Ended);
            }
            if self.large.outgoing.borrow().has_room() {
                break;
            }
            // The peer may be waiting for our "done"s just as we wait for its: send them
            // (this is the writer task) before waiting.
            self.send_dones().await?;
            if self.large.outgoing.borrow().has_room() {
                break;
            }
            // Woken by the peer's "done", a "done" we owe (`owe_dones`), or the end.
            self.writer_woken().await;
        }
        let held = match user_region(&self.shard.user_regions, &self.device, part) {
            Some(Ok(mr)) => Held::User(mr),
            other => {
                let user = other.is_some();
                match MemoryRegion::from_bytes(&self.device.pd, part.clone(), Access::REMOTE_READ) {
                    Ok(mr) => Held::Own(Tracked::new(&self.shard, mr)),
                    Err(e) => {
                        tracing::debug!(error = %e, len = part.len(), user, "large message sent by copy");
                        self.shard.stats.borrow_mut().large_copied += 1;
                        return Ok(false);
                    }
                }
            }
        };
        if matches!(held, Held::User(_)) {
            self.shard.stats.borrow_mut().large_sent_registered += 1;
        }
        let rkey = held.rkey();
        let id = self.large.outgoing.borrow_mut().insert(held);
        let chunk = self.reserve_send().await?;
        let mut rec = Vec::with_capacity(DESCRIPTOR_LEN);
        Record::Descriptor(Descriptor {
            id,
            addr: part.as_ptr() as u64,
            len: part.len() as u32,
            rkey,
        })
        .encode(&mut rec);
        self.device.pool.borrow_mut().write(chunk, 0, &rec);
        self.post_data(chunk, rec.len(), true)?;
        self.shard.stats.borrow_mut().large_sent += 1;
        Ok(true)
    }

    /// Owe the peer "done"s: wake the writer, wherever it waits.
    pub(super) fn owe_dones(&self, ids: Vec<u32>) {
        self.large.dones.borrow_mut().extend(ids);
        self.large.control_waker.wake();
        self.wake_writer();
    }

    /// Send the "done"s owed to the peer.
    pub(super) async fn send_dones(&self) -> Result<(), Ended> {
        while self.large.owes_dones() {
            let chunk = self.reserve_send().await?;
            let per_message = (self.peer_chunk / DONE_LEN).max(1);
            let ids: Vec<u32> = {
                let mut d = self.large.dones.borrow_mut();
                let n = d.len().min(per_message);
                d.drain(..n).collect()
            };
            let mut rec = Vec::with_capacity(ids.len() * DONE_LEN);
            for id in ids {
                Record::Done { id }.encode(&mut rec);
            }
            self.device.pool.borrow_mut().write(chunk, 0, &rec);
            self.post_data(chunk, rec.len(), true)?;
        }
        Ok(())
    }
}
