//! How long an idle shard polls before it sleeps in its driver: a spin gated by what recent
//! spins bought, so it is spent where it buys latency and skipped where it only burns CPU.
//!
//! A spin pays when work comes back before the window runs out *and* the shard was waiting
//! on a round trip: a lone client's next request answered without the wake-up latency of a
//! sleep (on these VMs a 1 × 1 echo's p50 is 40–70 % of tokio's with the spin). It does not pay
//! in two cases, which this module tells apart from timestamps the shard loop feeds it
//! (sans-I/O):
//!
//! - **Spins run out** (the shard parks anyway): a score counts up for each spin that found
//!   work and down for each that ran out (between 0 and [`SCORE_MAX`]); at zero the shard
//!   parks at once, so spinning stops where fewer than about half the spins pay (after at
//!   most [`SCORE_MAX`] wasted windows). One idle period in [`PROBE_EVERY`] still spins (a
//!   probe), so a workload that turns chatty again gets its spin back. The window keeps its
//!   full length: halving it after a miss made a ping-pong whose gap sits near the window
//!   (a client preempted now and then on a shared machine) miss again and again until it
//!   stopped spinning.
//! - **The shard is busy most of the time** (over [`BUSY_LIMIT`] of the last
//!   [`HORIZON_NS`] spent working): its idle gaps are the short tails between batches from
//!   many clients, the next batch comes whether or not the shard spins, and each spin pass
//!   (an `epoll_wait(0)` or a ring peek, and a `sched_yield`) only adds CPU per request —
//!   measured at 256 connections × depth 4: 11–12 % of the server's CPU on both backends. Such
//!   a shard parks at once, as tokio's does, and sleeping lets the next pass find a larger
//!   batch.
//! - **The core is shared with a thread that wants the CPU.** A spin pass that gives the CPU
//!   away (`sched_yield`) and gets it back only after a whole window has passed lost it to
//!   such a thread, which then keeps the core for its time slice: the shard, still runnable,
//!   is not woken by its I/O and answers milliseconds late (a 20 k requests/s open-loop echo
//!   beside a compiler at nice 19 had a p50 of 1.5–2.1 ms with the spin, 35–90 µs without,
//!   tokio 40–45 µs). Such a pass ends the spin, and the shard parks in its driver (where a
//!   wake-up preempts the other thread) without spinning for a hold-off that doubles, from
//!   [`HOLD_OFF_MIN`] to [`HOLD_OFF_MAX`], while each spin after it loses the core again: a
//!   count of idle periods would not do, at 20 k idle periods a second a probe every 16 of
//!   them still handed the core away most of the time.
//!
//! What a spin costs is its time, not its system calls: while it runs the core is busy
//! whatever each pass does (a 1 × 1 echo on these VMs keeps the shard 98 % busy with the spin,
//! so its CPU per request is the time between requests), and a cheaper pass only sees the
//! request a little sooner. Nor can the shard sleep through the start of a gap and wake just
//! ahead of the next request: the wake-up (a p50 round trip of 51 µs against 23 µs with the
//! spin) takes longer than the whole request cycle with the spin (23.5 µs at 42.5 k
//! requests/s). Where that CPU is not worth the latency, the spin is off
//! (`RuntimeBuilder::spin_before_park(0)`).

use std::time::{Duration, Instant};

/// Share of recent time (busy ÷ busy + idle) above which an idle shard parks without
/// spinning. A 1 × 1 ping-pong leaves a shard idle most of the time between requests; 64 or
/// 256 loaded connections keep it over four fifths busy (QPS × CPU per request).
pub(crate) const BUSY_LIMIT: f64 = 0.6;

/// The hit score's ceiling: how many spins in a row may run out before spinning stops.
pub(crate) const SCORE_MAX: u8 = 8;

/// With the score at zero, one idle period in this many spins (a probe).
pub(crate) const PROBE_EVERY: u32 = 16;

/// Time the busy share looks back over: the sums halve once they exceed it.
pub(crate) const HORIZON_NS: u64 = 2_000_000;

/// The first hold-off after a spin lost the core to another thread.
pub(crate) const HOLD_OFF_MIN: Duration = Duration::from_millis(10);

/// The longest hold-off: a core shared for good costs one lost spin a second.
pub(crate) const HOLD_OFF_MAX: Duration = Duration::from_secs(1);

/// What the shard loop does in an idle period (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct IdleSpin {
    /// The configured bound; zero turns spinning off.
    max_ns: u64,
    /// Off: always spin for `max_ns` (the behaviour before the spin adapted).
    adaptive: bool,
    /// Spins that found work minus spins that ran out, kept within 0..=SCORE_MAX.
    score: u8,
    /// Idle periods since the last probe while the score was zero.
    since_probe: u32,
    /// Decayed sums of busy time and of all time, for the busy share.
    busy_ns: u64,
    total_ns: u64,
    /// When the current busy stretch began (the end of the last idle period).
    busy_since: Instant,
    /// The current idle period: when it began, and the window it got.
    idle: Option<(Instant, u64)>,
    /// A spin pass of the open idle period lost the CPU for longer than the window.
    lost_cpu: bool,
    /// After spins lost the CPU: no spin before this instant, and the last hold-off (zero
    /// while spins keep the core).
    hold_off_until: Option<Instant>,
    hold_off: Duration,
}

/// How an idle period ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdleEnd {
    /// A spin pass found work inside the window.
    Spun,
    /// The shard slept in its driver first (the window ran out, or was zero).
    Parked,
}

impl IdleSpin {
    pub(crate) fn new(max: Duration, adaptive: bool, now: Instant) -> Self {
        let max_ns = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        IdleSpin {
            max_ns,
            adaptive,
            score: SCORE_MAX,
            since_probe: 0,
            busy_ns: 0,
            total_ns: 0,
            busy_since: now,
            idle: None,
            lost_cpu: false,
            hold_off_until: None,
            hold_off: Duration::ZERO,
        }
    }

    /// Whether an idle period is open (`begin` called, `end` not yet).
    pub(crate) fn is_idle(&self) -> bool {
        self.idle.is_some()
    }

    /// An idle period begins at `now`: how long to spin before parking (zero: park at once).
    pub(crate) fn begin(&mut self, now: Instant) -> Duration {
        let window = self.choose(now);
        self.idle = Some((now, window));
        Duration::from_nanos(window)
    }

    /// A spin pass gave the CPU away from `from` until `to`. Where that took longer than the
    /// window, another thread held the core: the spin ends here and, when the idle period
    /// ends, a hold-off begins (see the module docs).
    pub(crate) fn yielded(&mut self, from: Instant, to: Instant) {
        if let Some((_, window)) = self.idle {
            if self.adaptive && window > 0 && nanos_between(from, to) >= window {
                self.lost_cpu = true;
            }
        }
    }

    /// Whether the idle period that began with `begin` should spin once more at `now`.
    pub(crate) fn keep_spinning(&self, now: Instant) -> bool {
        if self.lost_cpu {
            return false;
        }
        match self.idle {
            Some((start, window)) => {
                window > 0 && (now.saturating_duration_since(start).as_nanos() as u64) < window
            }
            None => false,
        }
    }

    /// Whether the loop, about to reap, may leave the reap to the park: the open idle
    /// period's window ran out (or its spin lost the core), or, with none open, the one
    /// `begin(now)` would open gets no window and the shard is not busy. A busy shard reaps
    /// first, as its reap usually finds work: parking for it would tell other shards that it
    /// sleeps, and they would pay an eventfd write to reach it. Changes nothing.
    pub(crate) fn parks_at(&self, now: Instant) -> bool {
        if self.idle.is_some() {
            !self.keep_spinning(now)
        } else {
            self.busy_share() <= BUSY_LIMIT && self.clone().choose(now) == 0
        }
    }

    /// The open idle period ended at `now` with work found. Returns whether it had spun.
    pub(crate) fn end(&mut self, now: Instant, how: IdleEnd) -> bool {
        let Some((start, window)) = self.idle.take() else {
            return false;
        };
        let lost_cpu = std::mem::take(&mut self.lost_cpu);
        let busy = nanos_between(self.busy_since, start).min(HORIZON_NS);
        let gap = nanos_between(start, now).min(HORIZON_NS);
        self.busy_ns += busy;
        self.total_ns += busy + gap;
        while self.total_ns > HORIZON_NS {
            self.busy_ns /= 2;
            self.total_ns /= 2;
        }
        self.busy_since = now;
        if !self.adaptive || window == 0 {
            return window > 0;
        }
        if lost_cpu {
            self.hold_off = (self.hold_off * 2).clamp(HOLD_OFF_MIN, HOLD_OFF_MAX);
            self.hold_off_until = Some(now + self.hold_off);
        } else {
            self.hold_off = Duration::ZERO;
        }
        self.score = match how {
            IdleEnd::Spun => (self.score + 1).min(SCORE_MAX),
            IdleEnd::Parked => self.score.saturating_sub(1),
        };
        true
    }

    /// The share of recent time the shard spent working (0 before any idle period ended).
    pub(crate) fn busy_share(&self) -> f64 {
        if self.total_ns == 0 {
            0.0
        } else {
            self.busy_ns as f64 / self.total_ns as f64
        }
    }

    fn choose(&mut self, now: Instant) -> u64 {
        if !self.adaptive || self.max_ns == 0 {
            return self.max_ns;
        }
        if let Some(until) = self.hold_off_until {
            if now < until {
                return 0;
            }
            self.hold_off_until = None;
        }
        if self.busy_share() > BUSY_LIMIT {
            return 0;
        }
        if self.score > 0 {
            return self.max_ns;
        }
        self.since_probe += 1;
        if self.since_probe >= PROBE_EVERY {
            self.since_probe = 0;
            return self.max_ns;
        }
        0
    }
}

fn nanos_between(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_micros(50);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// One cycle: busy for `busy`, then idle for `gap`, ended as `how`. Returns the window the
    /// idle period got.
    fn cycle(
        s: &mut IdleSpin,
        t: &mut Instant,
        busy: Duration,
        gap: Duration,
        how: IdleEnd,
    ) -> Duration {
        *t += busy;
        let window = s.begin(*t);
        *t += gap;
        s.end(*t, how);
        window
    }

    #[test]
    fn a_ping_pong_keeps_the_full_window() {
        let mut t = Instant::now();
        let mut s = IdleSpin::new(MAX, true, t);
        for _ in 0..1000 {
            let w = cycle(&mut s, &mut t, us(5), us(20), IdleEnd::Spun);
            assert_eq!(w, MAX);
        }
        assert!(s.busy_share() < 0.3, "{}", s.busy_share());
    }

    #[test]
    fn spins_that_run_out_stop_the_spin_and_probes_bring_it_back() {
        let mut t = Instant::now();
        let mut s = IdleSpin::new(MAX, true, t);
        let windows: Vec<_> = (0..u32::from(SCORE_MAX) + 2)
            .map(|_| cycle(&mut s, &mut t, us(5), us(1000), IdleEnd::Parked))
            .collect();
        let spun = windows.iter().filter(|w| **w == MAX).count();
        assert_eq!(spun, usize::from(SCORE_MAX), "{windows:?}");
        assert_eq!(*windows.last().unwrap(), Duration::ZERO);

        // At zero, exactly one idle period in PROBE_EVERY spins, for the full bound.
        let mut probes = 0;
        for _ in 0..PROBE_EVERY * 4 {
            let w = cycle(&mut s, &mut t, us(5), us(1000), IdleEnd::Parked);
            if w > Duration::ZERO {
                assert_eq!(w, MAX);
                probes += 1;
            }
        }
        assert!((3..=4).contains(&probes), "{probes}");

        // A probe that finds work brings the spin back for the next idle period.
        let mut w = Duration::ZERO;
        while w == Duration::ZERO {
            w = cycle(&mut s, &mut t, us(5), us(20), IdleEnd::Spun);
        }
        assert_eq!(cycle(&mut s, &mut t, us(5), us(20), IdleEnd::Spun), MAX);
    }

    #[test]
    fn a_ping_pong_with_some_spins_running_out_keeps_spinning() {
        // One spin in four runs out (a client preempted on a shared machine, a gap just
        // longer than the window): every idle period still gets the full window.
        let mut t = Instant::now();
        let mut s = IdleSpin::new(MAX, true, t);
        for i in 0..1000 {
            let (gap, how) = if i % 4 == 0 {
                (us(60), IdleEnd::Parked)
            } else {
                (us(45), IdleEnd::Spun)
            };
            assert_eq!(cycle(&mut s, &mut t, us(5), gap, how), MAX, "cycle {i}");
        }
    }

    #[test]
    fn a_busy_shard_parks_at_once_and_spins_again_when_load_drops() {
        let mut t = Instant::now();
        let mut s = IdleSpin::new(MAX, true, t);
        // Many clients: 40 µs of work, then a short tail that a spin would cover.
        for _ in 0..200 {
            cycle(&mut s, &mut t, us(40), us(5), IdleEnd::Spun);
        }
        assert!(s.busy_share() > BUSY_LIMIT);
        assert_eq!(
            cycle(&mut s, &mut t, us(40), us(5), IdleEnd::Parked),
            Duration::ZERO
        );
        // The load drops to one client: within a few milliseconds the spin is back.
        let mut back = None;
        for i in 0..400 {
            if cycle(&mut s, &mut t, us(5), us(25), IdleEnd::Spun) > Duration::ZERO {
                back = Some(i);
                break;
            }
        }
        let back = back.expect("the spin came back");
        assert!(back < 200, "took {back} cycles");
    }

    #[test]
    fn fixed_mode_always_spins_the_bound_and_zero_never_spins() {
        let mut t = Instant::now();
        let mut fixed = IdleSpin::new(MAX, false, t);
        for _ in 0..100 {
            assert_eq!(
                cycle(&mut fixed, &mut t, us(40), us(100), IdleEnd::Parked),
                MAX
            );
        }
        let mut off = IdleSpin::new(Duration::ZERO, true, t);
        for _ in 0..100 {
            assert_eq!(
                cycle(&mut off, &mut t, us(5), us(20), IdleEnd::Parked),
                Duration::ZERO
            );
        }
    }

    #[test]
    fn parks_at_says_what_begin_will_do_and_changes_nothing() {
        let mut t = Instant::now();
        let mut s = IdleSpin::new(MAX, true, t);
        let mut probes = 0;
        // Spins that run out take the score to zero, where only probes spin.
        for _ in 0..u32::from(SCORE_MAX) + 4 * PROBE_EVERY {
            t += us(5);
            // Asked any number of times, the answer stays, and it is what `begin` does.
            let parks = s.parks_at(t);
            for _ in 0..3 * PROBE_EVERY {
                assert_eq!(s.parks_at(t), parks);
            }
            let window = s.begin(t);
            assert_eq!(parks, window.is_zero());
            if !parks {
                // Open and inside its window: the spin goes on; past it: the shard parks.
                assert!(!s.parks_at(t + us(10)));
                assert!(s.parks_at(t + MAX));
                probes += 1;
            }
            t += us(1000);
            s.end(t, IdleEnd::Parked);
        }
        let score_spins = usize::from(SCORE_MAX);
        assert!(
            (score_spins + 3..=score_spins + 4).contains(&probes),
            "{probes}"
        );
        // A busy shard parks without a spin, but reaps first.
        for _ in 0..200 {
            cycle(&mut s, &mut t, us(40), us(5), IdleEnd::Parked);
        }
        assert!(s.clone().begin(t).is_zero());
        assert!(!s.parks_at(t));
        // Spinning off: an idle shard leaves its reap to the park, a busy one reaps first.
        let mut off = IdleSpin::new(Duration::ZERO, true, t);
        assert!(off.parks_at(t));
        for _ in 0..200 {
            cycle(&mut off, &mut t, us(40), us(5), IdleEnd::Parked);
        }
        assert!(!off.parks_at(t));
        for _ in 0..200 {
            cycle(&mut off, &mut t, us(5), us(40), IdleEnd::Parked);
        }
        assert!(off.parks_at(t));
    }

    #[test]
    fn keep_spinning_follows_the_window() {
        let t = Instant::now();
        let mut s = IdleSpin::new(MAX, true, t);
        assert!(!s.keep_spinning(t));
        s.begin(t);
        assert!(s.is_idle());
        assert!(s.keep_spinning(t + us(49)));
        assert!(!s.keep_spinning(t + us(50)));
        assert!(s.end(t + us(60), IdleEnd::Parked));
        assert!(!s.is_idle());
    }

    #[test]
    fn a_long_sleep_does_not_swamp_the_busy_share() {
        let mut t = Instant::now();
        let mut s = IdleSpin::new(MAX, true, t);
        cycle(
            &mut s,
            &mut t,
            us(5),
            Duration::from_secs(10),
            IdleEnd::Parked,
        );
        for _ in 0..300 {
            cycle(&mut s, &mut t, us(40), us(5), IdleEnd::Spun);
        }
        assert!(s.busy_share() > BUSY_LIMIT, "{}", s.busy_share());
    }

    #[test]
    fn a_yield_that_loses_the_core_holds_the_spin_off_for_a_doubling_time() {
        let mut t = Instant::now();
        let mut s = IdleSpin::new(MAX, true, t);
        // A same-core partner that runs briefly (a client woken by the reply) keeps the spin.
        t += us(5);
        assert_eq!(s.begin(t), MAX);
        s.yielded(t, t + us(3));
        assert!(s.keep_spinning(t + us(3)));
        t += us(10);
        s.end(t, IdleEnd::Spun);
        // A thread that keeps the core for its slice: the spin ends at once, and none follows
        // for HOLD_OFF_MIN, however many idle periods come.
        let lose = |s: &mut IdleSpin, t: &mut Instant| {
            *t += us(5);
            assert_eq!(s.begin(*t), MAX);
            s.yielded(*t, *t + us(1500));
            *t += us(1500);
            assert!(!s.keep_spinning(*t));
            s.end(*t, IdleEnd::Spun);
        };
        // One idle period held off (parked) until `until`.
        let park_until = |s: &mut IdleSpin, t: &mut Instant, until: Instant| {
            *t += us(5);
            assert!(s.begin(*t).is_zero());
            *t = until;
            s.end(*t, IdleEnd::Parked);
        };
        lose(&mut s, &mut t);
        let held_until = t + HOLD_OFF_MIN;
        while t + us(100) < held_until {
            assert!(cycle(&mut s, &mut t, us(5), us(40), IdleEnd::Parked).is_zero());
        }
        park_until(&mut s, &mut t, held_until);
        // The next spin loses again: twice as long.
        lose(&mut s, &mut t);
        let held_until = t + 2 * HOLD_OFF_MIN;
        assert!(cycle(&mut s, &mut t, us(5), us(40), IdleEnd::Parked).is_zero());
        park_until(&mut s, &mut t, held_until - us(10));
        assert!(cycle(&mut s, &mut t, us(5), us(40), IdleEnd::Parked).is_zero());
        // A spin that keeps the core ends the hold-off for good.
        assert_eq!(cycle(&mut s, &mut t, us(5), us(20), IdleEnd::Spun), MAX);
        assert_eq!(cycle(&mut s, &mut t, us(5), us(20), IdleEnd::Spun), MAX);
        lose(&mut s, &mut t);
        let back = t + HOLD_OFF_MIN;
        park_until(&mut s, &mut t, back);
        assert_eq!(cycle(&mut s, &mut t, us(5), us(20), IdleEnd::Spun), MAX);
    }

    #[test]
    fn the_hold_off_stops_doubling_at_its_ceiling() {
        let mut t = Instant::now();
        let mut s = IdleSpin::new(MAX, true, t);
        for _ in 0..20 {
            // Held off: idle periods that park (5 ms each) until a spin is allowed again.
            loop {
                t += us(5);
                if !s.begin(t).is_zero() {
                    break;
                }
                t += Duration::from_millis(5);
                s.end(t, IdleEnd::Parked);
            }
            s.yielded(t, t + us(1500));
            t += us(1500);
            s.end(t, IdleEnd::Spun);
        }
        assert_eq!(s.hold_off, HOLD_OFF_MAX);
    }

    #[test]
    fn fixed_mode_ignores_lost_yields() {
        let mut t = Instant::now();
        let mut s = IdleSpin::new(MAX, false, t);
        t += us(5);
        s.begin(t);
        s.yielded(t, t + us(1500));
        assert!(s.keep_spinning(t + us(10)));
    }
}
