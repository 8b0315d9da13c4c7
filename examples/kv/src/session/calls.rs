//! What the session tells the server about each command it answers, once the reply is
//! there: its name, how long it took, whether it failed or was refused before running (INFO
//! commandstats / errorstats / latencystats, LATENCY HISTOGRAM), the SLOWLOG entry of a slow
//! one, and the MONITOR line. The glue takes them ([`Session::record_calls_with`],
//! [`Session::take_monitor_lines`]) into its shard's tables.
//!
//! The request itself is kept (for SLOWLOG and MONITOR) as the frame it arrived in, which
//! costs a reference count: its arguments are read again from it only when needed.

use bytes::{Bytes, BytesMut};

use super::Session;
use crate::reply::Reply;
use crate::resp::RequestParser;

/// The request, kept until its reply is accounted for.
#[derive(Debug, Default, Clone)]
pub(super) enum Frame {
    #[default]
    None,
    /// The whole RESP array, to parse again.
    Whole(Bytes),
    /// The arguments (a request that did not arrive in one piece, or an inline one).
    Args(Vec<Bytes>),
}

impl Frame {
    /// The request's size as it arrived (its arguments' for one that did not come whole).
    pub fn len(&self) -> usize {
        match self {
            Frame::None => 0,
            Frame::Whole(frame) => frame.len(),
            Frame::Args(args) => args.iter().map(|arg| arg.len()).sum(),
        }
    }

    pub fn args(&self) -> Vec<Bytes> {
        match self {
            Frame::None => Vec::new(),
            Frame::Args(args) => args.clone(),
            Frame::Whole(frame) => {
                let mut buf = BytesMut::from(&frame[..]);
                RequestParser::default()
                    .parse(&mut buf)
                    .ok()
                    .flatten()
                    .unwrap_or_default()
            }
        }
    }
}

/// What a reply slot remembers about its request.
#[derive(Debug, Default)]
pub(super) struct Call {
    /// Whether this slot answers a command (not a push or an extra confirmation).
    pub counted: bool,
    /// The command table's name (`None`: unknown command).
    pub name: Option<&'static str>,
    pub started_us: u64,
    /// Unix time at admission, microseconds (SLOWLOG's timestamp, MONITOR's).
    pub unix_us: u64,
    pub frame: Frame,
    /// Refused before it ran (arity, NOAUTH, a redirect, ...): Redis's `rejected_calls`.
    pub rejected: bool,
    /// EXEC: the queued commands (their replies are EXEC's array). Boxed: every reply slot
    /// has a call, few are EXEC's, and a thin pointer keeps the others small.
    #[allow(clippy::box_collection)]
    pub exec: Option<Box<Vec<Queued>>>,
}

/// A command queued in MULTI: its name (when it parsed) and its request.
pub type Queued = (Option<&'static str>, Frame);

/// One command answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// `None`: an unknown command (only its error is counted).
    pub name: Option<&'static str>,
    pub duration_us: u64,
    /// The error reply's code (its first word: `ERR`, `WRONGTYPE`, ...), if it failed.
    pub error: Option<Bytes>,
    /// Refused before running rather than failed while running.
    pub rejected: bool,
    /// Whether its error counts in INFO errorstats (a script's command leaves that to the
    /// script's own reply, which carries a `redis.call` error out).
    pub errorstat: bool,
    /// Its SLOWLOG entry, when it was slow enough. Boxed: a record is made per command and
    /// few are slow.
    pub slow: Option<Box<SlowEntry>>,
}

// One is made and moved per command answered: kept small (the rare SLOWLOG part boxed).
const _: () = assert!(std::mem::size_of::<CallRecord>() <= 72);

/// A SLOWLOG entry, without its id (the shard numbers it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowEntry {
    pub unix_s: u64,
    pub duration_us: u64,
    /// At most 32 arguments of at most 128 bytes, as Redis trims them.
    pub args: Vec<Bytes>,
    pub client_addr: String,
    pub client_name: Bytes,
}

/// Redis's `SLOWLOG_ENTRY_MAX_ARGC` and `SLOWLOG_ENTRY_MAX_STRING`.
const MAX_ARGS: usize = 32;
const MAX_ARG_LEN: usize = 128;

/// The arguments as SLOWLOG keeps them: at most 32 (the last saying how many more there
/// were), each at most 128 bytes (saying how many more it had).
pub fn trim_args(args: &[Bytes]) -> Vec<Bytes> {
    let shown = args.len().min(MAX_ARGS);
    let mut out = Vec::with_capacity(shown);
    for (i, arg) in args.iter().take(shown).enumerate() {
        if i == MAX_ARGS - 1 && args.len() > MAX_ARGS {
            out.push(Bytes::from(format!(
                "... ({} more arguments)",
                args.len() - MAX_ARGS + 1
            )));
        } else if arg.len() > MAX_ARG_LEN {
            let mut trimmed = arg[..MAX_ARG_LEN].to_vec();
            trimmed.extend_from_slice(
                format!("... ({} more bytes)", arg.len() - MAX_ARG_LEN).as_bytes(),
            );
            out.push(Bytes::from(trimmed));
        } else {
            out.push(arg.clone());
        }
    }
    out
}

/// The commands whose arguments SLOWLOG and MONITOR hide (Redis redacts them).
fn redact(name: Option<&str>, args: &mut [Bytes]) {
    let hide = |arg: &mut Bytes| *arg = Bytes::from_static(b"(redacted)");
    match name {
        Some("auth") => args.iter_mut().skip(1).for_each(hide),
        Some("hello") => {
            let mut i = 2;
            while i < args.len() {
                if args[i].eq_ignore_ascii_case(b"auth") {
                    args.iter_mut().skip(i + 1).take(2).for_each(hide);
                    i += 3;
                } else if args[i].eq_ignore_ascii_case(b"setname") {
                    i += 2;
                } else {
                    i += 1;
                }
            }
        }
        Some("migrate") => {
            let mut i = 6;
            while i < args.len() {
                if args[i].eq_ignore_ascii_case(b"auth") {
                    args.iter_mut().skip(i + 1).take(1).for_each(hide);
                    i += 2;
                } else if args[i].eq_ignore_ascii_case(b"auth2") {
                    args.iter_mut().skip(i + 1).take(2).for_each(hide);
                    i += 3;
                } else {
                    i += 1;
                }
            }
        }
        Some("config|set") => {
            let mut i = 2;
            while i + 1 < args.len() {
                let sensitive = std::str::from_utf8(&args[i])
                    .ok()
                    .and_then(crate::config::table::find)
                    .is_some_and(|(_, spec)| spec.has(crate::config::table::SENSITIVE));
                if sensitive {
                    hide(&mut args[i + 1]);
                }
                i += 2;
            }
        }
        _ => {}
    }
}

/// The error code Redis's errorstats counts: the reply's first word.
pub(crate) fn error_code(reply: &Reply) -> Option<Bytes> {
    let Reply::Error(text) = reply else {
        return None;
    };
    Some(first_word(text))
}

fn first_word(text: &Bytes) -> Bytes {
    let end = text.iter().position(|&b| b == b' ').unwrap_or(text.len());
    text.slice(..end)
}

/// Errors that mean the command was refused before running (Redis's `rejected_calls`) when
/// they come from a shard rather than from the session's own checks.
fn refused_code(code: &[u8]) -> bool {
    matches!(
        code,
        b"OOM" | b"MOVED" | b"ASK" | b"CROSSSLOT" | b"TRYAGAIN" | b"CLUSTERDOWN" | b"NOPERM"
    )
}

/// An error a script's `redis.call` raised (Redis appends "script: SHA, on @user_script:LINE."
/// to it): the script ran and failed, whatever the code (an OOM of its first write, for one).
fn raised_in_script(reply: &Reply) -> bool {
    const MARK: &[u8] = b" script: ";
    matches!(reply, Reply::Error(text) if text.windows(MARK.len()).any(|w| w == MARK))
}

impl Session {
    /// The clocks the glue reads: a monotonic one for durations and the Unix time, both in
    /// microseconds. Set before requests are parsed and before replies are completed.
    pub fn set_clock(&mut self, monotonic_us: u64, unix_us: u64) {
        self.clock_us = monotonic_us;
        self.unix_us = unix_us;
    }

    /// The monotonic clock alone (before completing a reply just computed).
    pub fn set_monotonic(&mut self, monotonic_us: u64) {
        self.clock_us = monotonic_us;
    }

    /// MONITOR was sent or undone since the last call: whether it is on now.
    pub fn take_monitor_change(&mut self) -> Option<bool> {
        std::mem::take(&mut self.modes.monitor_changed).then_some(self.modes.monitor)
    }

    /// The commands answered since the last call, for the glue (every turn): `record` reads
    /// them where they lie (moving each out cost a copy of the record), and they are dropped
    /// after it. Inlined: most turns answered nothing.
    #[inline]
    pub fn record_calls_with(&mut self, record: impl FnOnce(&mut [CallRecord])) {
        if !self.calls.is_empty() {
            record(&mut self.calls);
            self.calls.clear();
        }
    }

    /// MONITOR lines of the commands answered since the last call (only while some
    /// connection monitors).
    ///
    /// `None` when there are none: asked after every request, and a connection without
    /// the rare part has none (no call into the shard for an empty vector).
    #[inline]
    pub fn take_monitor_lines(&mut self) -> Option<Vec<Bytes>> {
        let rare = self.rare.as_mut()?;
        (!rare.monitor_lines.is_empty()).then(|| std::mem::take(&mut rare.monitor_lines))
    }

    /// Whether requests must be kept for SLOWLOG or MONITOR.
    pub(super) fn keeps_requests(&self) -> bool {
        let hot = &self.config.live.hot;
        hot.slowlog_slower_than_us
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 0
            || hot.monitors.load(std::sync::atomic::Ordering::Relaxed) > 0
    }

    /// The commands Redis shows in MONITOR as they start rather than when done (EXEC, EVAL,
    /// FCALL, flagged `skip_monitor`): their line goes out before what they run.
    pub(super) fn monitor_at_start(&mut self, seq: u64) {
        let hot = &self.config.live.hot;
        if hot.monitors.load(std::sync::atomic::Ordering::Relaxed) == 0 || self.rejecting {
            return;
        }
        let Some(name) = self.identity.last_command else {
            return;
        };
        let Some(meta) = crate::introspect::meta::find(name) else {
            return;
        };
        if !meta.has_flag("skip_monitor") || meta.has_flag("admin") {
            return;
        }
        let Some(slot) = self.replies.slot(seq) else {
            return;
        };
        let (unix_us, mut args) = (slot.call.unix_us, slot.call.frame.args());
        redact(Some(name), &mut args);
        let peer = self.peer_text();
        let line = monitor_line(unix_us, &peer, &args);
        self.rare().monitor_lines.push(line);
    }

    /// A request's accounting, started at parse time.
    pub(super) fn begin_call(&self, frame: Frame) -> Call {
        Call {
            counted: true,
            started_us: self.clock_us,
            unix_us: self.unix_us,
            frame,
            ..Call::default()
        }
    }

    /// Names request `seq` (once parsed), and says whether it was refused before running.
    pub(super) fn name_call(&mut self, seq: u64, name: Option<&'static str>, rejected: bool) {
        if let Some(slot) = self.replies.slot(seq) {
            slot.call.name = name;
            slot.call.rejected = rejected;
        }
    }

    /// EXEC's queued commands, for their accounting when EXEC's reply comes.
    pub(super) fn exec_calls(&mut self, seq: u64, items: Vec<(Option<&'static str>, Frame)>) {
        if let Some(slot) = self.replies.slot(seq) {
            slot.call.exec = Some(Box::new(items));
        }
    }

    /// Accounts for request `seq` answered with `reply` (before the reply is stored).
    pub(super) fn account(&mut self, seq: u64, reply: &Reply) {
        let now = self.clock_us;
        let Some(slot) = self.replies.slot(seq) else {
            return;
        };
        if !slot.call.counted {
            return;
        }
        // The parts needed, not the whole call moved out (this runs per command).
        let call = &mut slot.call;
        call.counted = false;
        let (name, rejected, started_us, unix_us) =
            (call.name, call.rejected, call.started_us, call.unix_us);
        let (frame, exec) = (std::mem::take(&mut call.frame), call.exec.take());
        let duration = now.saturating_sub(started_us);
        if let Some(items) = &exec {
            // Each queued command counts as a call of its own (none ran if EXEC failed).
            if let Reply::Array(replies) = reply {
                let first = self.calls.len();
                for ((name, frame), reply) in items.iter().zip(replies) {
                    // Redis logs each queued command as it runs, so a SLOWLOG RESET among
                    // them clears the entries of the ones before it.
                    if *name == Some("slowlog|reset") && *reply == Reply::ok() {
                        for call in &mut self.calls[first..] {
                            call.slow = None;
                        }
                    }
                    self.record(*name, 0, reply, false, frame, unix_us);
                }
            }
        }
        self.record(name, duration, reply, rejected, &frame, unix_us);
    }

    fn record(
        &mut self,
        name: Option<&'static str>,
        duration_us: u64,
        reply: &Reply,
        rejected: bool,
        frame: &Frame,
        unix_us: u64,
    ) {
        // A script's `redis.pcall` error returned as its reply: failed, counted already.
        let counted = reply.as_counted_error();
        let error = match counted {
            Some(text) => Some(first_word(text)),
            None => error_code(reply),
        };
        let rejected = rejected
            || (counted.is_none()
                && error.as_deref().is_some_and(refused_code)
                && !raised_in_script(reply));
        let threshold = (self.config.live.hot.slowlog_slower_than_us)
            .load(std::sync::atomic::Ordering::Relaxed);
        // The command's flags are looked up only when they matter (rarely: per request they
        // would cost a name lookup).
        let meta = || name.and_then(crate::introspect::meta::find);
        let slow = (threshold >= 0
            && duration_us >= threshold as u64
            && name.is_some()
            && !rejected
            && !meta().is_some_and(|m| m.has_flag("skip_slowlog")))
        .then(|| {
            let mut args = frame.args();
            redact(name, &mut args);
            Box::new(SlowEntry {
                unix_s: unix_us / 1_000_000,
                duration_us,
                args: trim_args(&args),
                client_addr: self.peer_text(),
                client_name: self.client_name(),
            })
        });
        let monitors = self
            .config
            .live
            .hot
            .monitors
            .load(std::sync::atomic::Ordering::Relaxed);
        if monitors > 0
            && !rejected
            && name.is_some()
            && !meta().is_some_and(|m| m.has_flag("admin") || m.has_flag("skip_monitor"))
        {
            let mut args = frame.args();
            redact(name, &mut args);
            let line = monitor_line(unix_us, &self.peer_text(), &args);
            self.rare().monitor_lines.push(line);
        }
        self.calls.push(CallRecord {
            name,
            duration_us,
            error,
            rejected,
            errorstat: counted.is_none(),
            slow,
        });
    }
}

/// Redis's MONITOR line: `+<unix time with microseconds> [0 <client>] "arg" ...`, quoted as
/// `sdscatrepr` quotes.
pub fn monitor_line(unix_us: u64, client: &str, args: &[Bytes]) -> Bytes {
    let mut line = format!(
        "{}.{:06} [0 {client}]",
        unix_us / 1_000_000,
        unix_us % 1_000_000
    );
    for arg in args {
        line.push(' ');
        line.push_str(&crate::config::file::quote(&String::from_utf8_lossy(arg)));
    }
    Bytes::from(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::from(s.to_owned())
    }

    #[test]
    fn slowlog_trims_as_redis() {
        let many: Vec<Bytes> = (0..35).map(|i| b(&i.to_string())).collect();
        let trimmed = trim_args(&many);
        assert_eq!(trimmed.len(), 32);
        assert_eq!(trimmed[31], b("... (4 more arguments)"));
        let long = vec![b("sadd"), b(&"A".repeat(129))];
        assert_eq!(
            trim_args(&long)[1],
            b(&format!("{}... (1 more bytes)", "A".repeat(128)))
        );
        let mut auth = vec![b("auth"), b("user"), b("pass")];
        redact(Some("auth"), &mut auth);
        assert_eq!(auth, vec![b("auth"), b("(redacted)"), b("(redacted)")]);
        let mut set = vec![
            b("config"),
            b("set"),
            b("masterauth"),
            b("x"),
            b("hz"),
            b("5"),
        ];
        redact(Some("config|set"), &mut set);
        assert_eq!(set[3], b("(redacted)"));
        assert_eq!(set[5], b("5"));
        assert_eq!(
            monitor_line(1_500_000_123_456, "1.2.3.4:5", &[b("set"), b("a b")]),
            b("1500000.123456 [0 1.2.3.4:5] \"set\" \"a b\"")
        );
    }
}
