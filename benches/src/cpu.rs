//! CPU time of this process (getrusage) and of another process (its CPU-time clock, and
//! /proc/PID/stat for the user/system split), so a report can say what each side spent per
//! request.

use std::fmt;

use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::time::TimeValLike;
use nix::time::{clock_getcpuclockid, clock_gettime};
use nix::unistd::{sysconf, Pid, SysconfVar};

/// Why a CPU time could not be read.
#[derive(Debug)]
pub enum CpuError {
    /// A system call failed.
    Sys(nix::Error),
    /// /proc could not be read (e.g. the process is gone).
    Io(std::io::Error),
    /// /proc/PID/stat did not have the expected shape.
    Malformed(String),
}

impl fmt::Display for CpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuError::Sys(e) => write!(f, "system call failed: {e}"),
            CpuError::Io(e) => write!(f, "cannot read /proc: {e}"),
            CpuError::Malformed(why) => write!(f, "malformed /proc stat: {why}"),
        }
    }
}

impl std::error::Error for CpuError {}

/// User + system CPU seconds used so far by this process (all threads).
pub fn self_cpu_seconds() -> Result<f64, CpuError> {
    let usage = getrusage(UsageWho::RUSAGE_SELF).map_err(CpuError::Sys)?;
    let micros = usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
    Ok(micros as f64 / 1e6)
}

/// CPU seconds used so far by process `pid` (all its threads, exited ones included), with
/// nanosecond resolution: the kernel's per-process CPU-time clock (`clock_getcpuclockid`),
/// which anyone may read. /proc/PID/stat counts in clock ticks (10 ms at CLK_TCK 100), so a
/// short window on a busy machine could read 0 there; this clock cannot while the process
/// ran at all.
pub fn process_cpu_seconds(pid: u32) -> Result<f64, CpuError> {
    let raw = i32::try_from(pid).map_err(|_| CpuError::Sys(nix::Error::ESRCH))?;
    let clock = clock_getcpuclockid(Pid::from_raw(raw)).map_err(CpuError::Sys)?;
    let t = clock_gettime(clock).map_err(CpuError::Sys)?;
    Ok(t.tv_sec() as f64 + t.tv_nsec() as f64 / 1e9)
}

/// User and system CPU seconds (separately) used so far by process `pid`, in clock ticks'
/// resolution (/proc/PID/stat): for the split only; [`process_cpu_seconds`] is the total.
pub fn process_user_sys_seconds(pid: u32) -> Result<(f64, f64), CpuError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(CpuError::Io)?;
    let (user, sys) = stat_user_sys_ticks(&stat)?;
    let per_sec = sysconf(SysconfVar::CLK_TCK)
        .map_err(CpuError::Sys)?
        .filter(|t| *t > 0)
        .ok_or_else(|| CpuError::Malformed("CLK_TCK unavailable".to_string()))?
        as f64;
    Ok((user as f64 / per_sec, sys as f64 / per_sec))
}

/// utime + stime (fields 14 and 15) from the text of /proc/PID/stat.
///
/// The command name (field 2) is parenthesised and may contain spaces or parentheses, so fields
/// are counted from the last `)`.
pub fn stat_cpu_ticks(stat: &str) -> Result<u64, CpuError> {
    let (user, sys) = stat_user_sys_ticks(stat)?;
    Ok(user + sys)
}

/// utime and stime (fields 14 and 15) from the text of /proc/PID/stat, separately.
pub fn stat_user_sys_ticks(stat: &str) -> Result<(u64, u64), CpuError> {
    let after_comm = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or_else(|| CpuError::Malformed("no command name".to_string()))?;
    // After ")" comes field 3 (state), so utime (14) and stime (15) are at indices 11 and 12.
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let field = |i: usize| -> Result<u64, CpuError> {
        fields
            .get(i)
            .ok_or_else(|| CpuError::Malformed(format!("only {} fields", fields.len() + 2)))?
            .parse()
            .map_err(|e| CpuError::Malformed(format!("field {}: {e}", i + 3)))
    };
    Ok((field(11)?, field(12)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_utime_and_stime_even_with_odd_command_names() {
        let stat = "4242 (echo (x) srv) S 1 4242 4242 0 -1 4194560 310 0 0 0 125 37 0 0 20 0 3 0 \
                    99 1000 200 18446744073709551615";
        assert_eq!(stat_cpu_ticks(stat).unwrap(), 162);
        assert!(matches!(
            stat_cpu_ticks("1 (x) S 1 2"),
            Err(CpuError::Malformed(_))
        ));
        assert!(matches!(
            stat_cpu_ticks("garbage"),
            Err(CpuError::Malformed(_))
        ));
    }

    #[test]
    fn reads_own_cpu_time_both_ways() {
        // Burn a little CPU so the counters are non-zero.
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let own = self_cpu_seconds().unwrap();
        assert!(own > 0.0);
        // The clock counts what this process ran up to now, the burn above included; getrusage
        // was read first, so the clock cannot be behind it by more than rounding.
        let clock = process_cpu_seconds(std::process::id()).unwrap();
        assert!(
            clock > 0.0 && clock + 1e-6 >= own,
            "clock {clock} getrusage {own}"
        );
        let (user, sys) = process_user_sys_seconds(std::process::id()).unwrap();
        assert!(user >= 0.0 && sys >= 0.0);
        assert!(matches!(
            process_cpu_seconds(u32::MAX),
            Err(CpuError::Sys(_))
        ));
        assert!(matches!(
            process_user_sys_seconds(u32::MAX),
            Err(CpuError::Io(_))
        ));
    }
}
