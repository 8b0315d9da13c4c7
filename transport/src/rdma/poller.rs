//! A shard's completion-queue poller for one device, in the three modes of [`PollerMode`].

use std::rc::Rc;
use std::time::Instant;

use corewire_runtime::{PollOutcome, Poller};
use corewire_verbs::WorkCompletion;

use super::device::Device;
use super::poll_tally::PollTally;
use super::shard::RdmaShard;
use super::wr_id::{WrId, WrKind};
use super::PollerMode;

pub(crate) struct CqPoller {
    shard: Rc<RdmaShard>,
    device: Rc<Device>,
    wcs: Vec<WorkCompletion>,
    /// Adaptive mode: when the last completion arrived, or `None` once the CQ is armed and
    /// the shard may sleep.
    spinning_since: Option<Instant>,
    may_park: bool,
    /// Event mode: the last pass drained the CQ after a wake-up and this one re-arms it.
    rearm_due: bool,
    /// Receive completions per connection in the current pass.
    tally: PollTally,
}

impl CqPoller {
    pub(crate) fn new(shard: Rc<RdmaShard>, device: Rc<Device>) -> CqPoller {
        let batch = shard.config().poll_batch.max(1);
        CqPoller {
            shard,
            device,
            wcs: vec![WorkCompletion::default(); batch],
            spinning_since: Some(Instant::now()),
            may_park: false,
            rearm_due: false,
            tally: PollTally::default(),
        }
    }

    /// Poll the CQ once (up to one batch) and hand each completion to its connection.
    fn poll_once(&mut self) -> usize {
        let n = match self.device.cq.poll(&mut self.wcs) {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(error = %e, "ibv_poll_cq failed");
                return 0;
            }
        };
        {
            let mut st = self.shard.stats.borrow_mut();
            st.cq_polls += 1;
            st.completions += n as u64;
        }
        if n < self.wcs.len() {
            self.device.cq_drained();
        }
        for wc in &self.wcs[..n] {
            let Some(id) = WrId::decode(wc.wr_id) else {
                tracing::error!(
                    wr_id = wc.wr_id,
                    "completion with an unknown work request id"
                );
                continue;
            };
            if id.kind == WrKind::SharedRecv {
                // Copy the message out to its connection, then post the buffer again.
                let conn = self
                    .device
                    .conn_of_qp(wc.qp_num)
                    .and_then(|(slot, generation)| self.shard.conn(slot, generation));
                if let Some(conn) = conn {
                    self.tally.add(conn.key());
                    conn.on_completion(id, wc);
                }
                if wc.status == corewire_verbs::WcStatus::WrFlushError {
                    // Only a destroyed shared queue flushes its buffers: they stay with the
                    // pool, which goes away with it.
                    continue;
                }
                self.device.shared_recv_done(id.buffer);
                continue;
            }
            match self.shard.conn(id.conn_slot, id.generation) {
                Some(conn) => {
                    if id.kind == WrKind::Recv {
                        self.tally.add(conn.key());
                    }
                    conn.on_completion(id, wc)
                }
                // A flushed completion of a connection already torn down: its buffers were
                // reclaimed when its queue pair was destroyed.
                None => tracing::trace!(?id, status = ?wc.status, "stale completion"),
            }
        }
        if n > 0 {
            // Messages used grants of the shared budget: connections waiting for some now
            // get theirs.
            self.device.serve_grant_waiters(&self.shard);
        }
        n
    }

    /// Poll until the CQ is empty.
    fn drain(&mut self) -> usize {
        let mut total = 0;
        loop {
            let n = self.poll_once();
            total += n;
            if n < self.wcs.len() {
                return total;
            }
        }
    }

    /// Arm the CQ, then poll once more: a completion that arrived between the last poll and
    /// the arming raises no event (brpc lost CQEs exactly there). The channel's events are
    /// read first (they must be read; the CQ, once armed, raises the next one regardless).
    fn arm_and_recheck(&mut self) -> usize {
        self.device.read_channel_events();
        let solicited = self.shard.config().solicited_wakeups;
        if let Err(e) = self.device.arm(solicited) {
            tracing::error!(error = %e, "ibv_req_notify_cq failed");
        }
        self.drain()
    }
}

impl Poller for CqPoller {
    fn name(&self) -> &str {
        "rdma-cq"
    }

    fn poll(&mut self) -> PollOutcome {
        self.tally.clear();
        let n = match self.shard.mode() {
            PollerMode::Polling { yield_when_idle } => {
                self.may_park = false;
                self.spinning_since = Some(Instant::now());
                let n = self.poll_once();
                if n == 0 && yield_when_idle {
                    std::thread::yield_now();
                }
                n
            }
            PollerMode::Event => {
                if self.rearm_due {
                    // The pass after a drain, whatever was flagged since: the recheck drains
                    // for every reason `event_pending` has (the channel, a send waiter, freed
                    // CQ entries), and the channel is read here. Taking a new flag first could
                    // starve this: a single-shot poll (`COREWIRE_IO_URING=plain`) re-armed on
                    // the channel before its event is read completes at once, every pass.
                    self.rearm_due = false;
                    self.device.event_pending.set(false);
                    self.may_park = true;
                    self.arm_and_recheck()
                } else if self.device.event_pending.replace(false) {
                    // Hand the completions out now, re-arm on the next pass: the tasks they
                    // woke run in between, so a reply (or the next request) is posted before
                    // the channel read and the re-arm, two syscalls (tens of µs each under
                    // the VM's TCG) that were on every round trip's critical path. The shard
                    // cannot park in between (`may_park` false), and completions that arrive
                    // meanwhile are drained by the re-arm's recheck.
                    self.may_park = false;
                    self.rearm_due = true;
                    self.drain()
                } else {
                    self.may_park = true;
                    0
                }
            }
            PollerMode::Adaptive { idle } => match self.spinning_since {
                Some(since) => {
                    self.may_park = false;
                    let n = self.poll_once();
                    let now = Instant::now();
                    if n > 0 {
                        self.spinning_since = Some(now);
                        n
                    } else if now.duration_since(since) >= idle {
                        let late = self.arm_and_recheck();
                        if late == 0 {
                            self.spinning_since = None;
                            self.may_park = true;
                            self.shard.stats.borrow_mut().mode_switches += 1;
                        } else {
                            self.spinning_since = Some(now);
                        }
                        late
                    } else {
                        0
                    }
                }
                None => {
                    self.may_park = true;
                    if self.device.event_pending.replace(false) {
                        self.spinning_since = Some(Instant::now());
                        self.may_park = false;
                        self.shard.stats.borrow_mut().mode_switches += 1;
                        let n = self.drain();
                        // Spinning may last long before the next arming: read the channel
                        // now, or a single-shot poll re-armed on it would complete at once
                        // every pass meanwhile.
                        self.device.read_channel_events();
                        n
                    } else {
                        0
                    }
                }
            },
        };
        if n > 0 {
            let busiest = u64::from(self.tally.max());
            let mut st = self.shard.stats.borrow_mut();
            st.max_conn_recvs_per_poll = st.max_conn_recvs_per_poll.max(busiest);
            drop(st);
            PollOutcome::Progress(n)
        } else {
            PollOutcome::Idle
        }
    }

    fn may_park(&self) -> bool {
        self.may_park
    }
}
