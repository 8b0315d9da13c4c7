//! When an idle connection's buffers go. Freeing them at every wait made a connection that
//! waits between requests (`-P 1`, a client's round trip) free its input, output, reply
//! slots and answered calls after each request and allocate them again for the next one.
//! A waiting connection that holds buffers is listed on its shard instead; the shard's
//! sweep (every `sweep_interval`, 100 ms by default) frees them once no input has arrived
//! for a whole interval, as Redis frees an idle client's query buffer from its cron. An idle
//! connection then holds only its fixed state, after at most two intervals.

use super::Session;

/// Where a connection stands with its shard's idle sweep.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct IdleState {
    /// On the shard's list: the sweep looks at it.
    listed: bool,
    /// Input arrived since the sweep last looked.
    active: bool,
}

impl IdleState {
    /// Input arrived.
    pub(super) fn note_input(&mut self) {
        self.active = true;
    }
}

impl Session {
    /// The connection is about to wait: whether it should be put on the shard's idle list
    /// (it holds buffers and is not listed yet). The glue then calls
    /// [`Session::idle_sweep`] from the shard's sweep.
    pub fn wants_idle_sweep(&mut self) -> bool {
        if self.idle.listed || !self.holds_buffers() {
            return false;
        }
        self.idle.listed = true;
        true
    }

    /// The shard's sweep: frees the buffers not in use when no input arrived since the
    /// previous sweep. Returns whether the connection stays listed (it was active, so its
    /// buffers are kept for another interval).
    pub fn idle_sweep(&mut self) -> bool {
        if std::mem::take(&mut self.idle.active) {
            return true;
        }
        self.release_idle_buffers();
        self.idle.listed = false;
        false
    }

    /// Whether any buffer [`Session::release_idle_buffers`] frees is allocated.
    fn holds_buffers(&self) -> bool {
        self.calls.capacity() > 0
            || self.rare.as_ref().is_some_and(|rare| rare.is_empty())
            || self.input.capacity() > 0
            || self.output.capacity() > 0
            || self.replies.capacity() > 0
    }
}
