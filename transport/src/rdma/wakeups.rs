//! Which completions wake a shard that sleeps on its completion channel (event mode, and
//! adaptive mode once idle), with `RdmaConfig::solicited_wakeups`.
//!
//! Every message is sent solicited: data, and credit acks too (a writer out of credits may
//! be waiting for one, and the sender cannot tell: an ack sent unsolicited while the peer
//! seemed to have credits left can deadlock once those run out). What needs no wake-up is
//! our own send completions: the CQ is armed for solicited completions only while nothing on
//! this device waits for one of its sends to complete ([`SendWait`]). A request's send
//! completion then wakes nobody, the reply that follows does and the send completion is
//! reaped with it: a round trip costs one wake-up instead of two. A waiter that appears
//! while the CQ is armed that way forces a drain and a full re-arm.
//!
//! A send that fails (the peer vanished) completes unsolicited, and rxe raises no event for
//! it: while the CQ is armed for solicited completions only and connections are open, a
//! sweep drains it every [`SWEEP`], so a broken connection is still noticed, at most
//! [`SWEEP`] later (its retry budget takes far longer). An idle shard with open connections
//! therefore wakes 1/[`SWEEP`] times a second in this setting.

use std::cell::Cell;
use std::rc::{Rc, Weak};
use std::time::Duration;

use corewire_runtime::sleep;
use corewire_runtime::sync::Notify;

use super::device::Device;

/// How often the CQ is drained while armed for solicited completions only.
pub(crate) const SWEEP: Duration = Duration::from_millis(50);

#[derive(Default)]
pub(crate) struct Wakeups {
    /// Tasks waiting for a send completion of this device (writers out of send slots or
    /// buffers, closes waiting for their last sends).
    send_waits: Cell<u32>,
    /// The CQ's last arming asked for solicited completions only.
    solicited_armed: Cell<bool>,
    /// Starts a sweep (signalled at each solicited-only arming, and when the device goes).
    sweep: Notify,
}

impl Wakeups {
    /// Whether the next arming may ask for solicited completions only.
    pub fn solicited_only(&self, enabled: bool) -> bool {
        enabled && self.send_waits.get() == 0
    }

    /// The CQ was just armed.
    pub fn armed(&self, solicited_only: bool) {
        self.solicited_armed.set(solicited_only);
        if solicited_only {
            self.sweep.notify_one();
        }
    }

    /// The device is going: the sweep task ends.
    pub fn close(&self) {
        self.sweep.notify_one();
    }
}

/// Held while a task waits for a send completion of `device`: the CQ is armed for every
/// completion meanwhile.
pub(crate) struct SendWait<'a> {
    device: &'a Device,
}

impl<'a> SendWait<'a> {
    pub fn new(device: &'a Device) -> SendWait<'a> {
        let w = &device.wakeups;
        w.send_waits.set(w.send_waits.get() + 1);
        if w.solicited_armed.get() {
            // Re-armed for every completion at the poller's next pass (a drain first:
            // completions that arrived meanwhile raised no event).
            device.event_pending.set(true);
        }
        SendWait { device }
    }
}

impl Drop for SendWait<'_> {
    fn drop(&mut self) {
        let w = &self.device.wakeups;
        w.send_waits.set(w.send_waits.get().saturating_sub(1));
    }
}

/// Drain the CQ [`SWEEP`] after each solicited-only arming, while connections are open.
pub(crate) async fn sweep(device: Weak<Device>, wakeups: Rc<Wakeups>) {
    loop {
        wakeups.sweep.notified().await;
        sleep(SWEEP).await;
        let Some(device) = device.upgrade() else {
            return;
        };
        if wakeups.solicited_armed.get() && device.has_connections() {
            device.event_pending.set(true);
        }
    }
}
