//! Counts another process's system calls over a window with `perf stat` (tracepoints
//! `syscalls:sys_enter_io_uring_enter` and `raw_syscalls:sys_enter`), so a report can say how
//! many ring enters and syscalls a server makes per request.
//!
//! perf starts with its counters disabled (`-D -1`) and is driven through a control FIFO
//! (`--control fifo:CTL,ACK`): `enable` and `disable` are acknowledged, so the counted window is
//! the caller's window, not perf's start-up. Counting costs the server a little per syscall
//! (a tracepoint hit), which the report notes; it needs perf and permission to trace the pid.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::sys::stat::Mode;
use nix::unistd::{mkfifo, Pid};

const ENTER_EVENT: &str = "syscalls:sys_enter_io_uring_enter";
const ALL_EVENT: &str = "raw_syscalls:sys_enter";
/// A bound on perf's answer to one command, not an expectation: perf sets its events up
/// before it reads the control FIFO, which takes seconds on a loaded machine.
const ACK_TIMEOUT: Duration = Duration::from_secs(30);

/// Counts over one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyscallCounts {
    pub uring_enters: u64,
    pub syscalls: u64,
}

/// A perf process attached to a pid, counters disabled until `enable`.
pub struct SyscallCounter {
    child: Child,
    dir: PathBuf,
    ctl: File,
    ack: File,
}

impl SyscallCounter {
    /// Attaches perf to `pid` (counters off) and returns once perf answers on its control
    /// FIFO, so a later [`SyscallCounter::enable`] is quick and the counted window is the
    /// caller's.
    pub fn attach(pid: u32) -> io::Result<SyscallCounter> {
        let dir = std::env::temp_dir().join(format!("loadgen-perf-{}-{pid}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let (ctl_path, ack_path) = (dir.join("ctl"), dir.join("ack"));
        for p in [&ctl_path, &ack_path] {
            let _ = std::fs::remove_file(p);
            mkfifo(p, Mode::S_IRUSR | Mode::S_IWUSR).map_err(io::Error::from)?;
        }
        // Read-write opens of a FIFO never block, whether or not perf has opened its end.
        let open = |p: &PathBuf| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(nix::libc::O_NONBLOCK)
                .open(p)
        };
        let (ctl, ack) = (open(&ctl_path)?, open(&ack_path)?);
        let child = Command::new("perf")
            .arg("stat")
            .arg("-x,")
            .args(["-e", &format!("{ENTER_EVENT},{ALL_EVENT}")])
            .arg("--control")
            .arg(format!(
                "fifo:{},{}",
                ctl_path.display(),
                ack_path.display()
            ))
            .args(["-D", "-1", "-p", &pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut counter = SyscallCounter {
            child,
            dir,
            ctl,
            ack,
        };
        // The counters start disabled: disabling them again changes nothing, and the ack says
        // perf is set up and listening.
        if let Err(e) = counter.command("disable") {
            let _ = counter.child.kill();
            let _ = counter.child.wait();
            let _ = std::fs::remove_dir_all(&counter.dir);
            return Err(e);
        }
        Ok(counter)
    }

    fn command(&mut self, word: &str) -> io::Result<()> {
        self.ctl.write_all(format!("{word}\n").as_bytes())?;
        let deadline = Instant::now() + ACK_TIMEOUT;
        let mut got = Vec::new();
        let mut buf = [0u8; 16];
        // perf answers "ack\n" followed by a NUL byte.
        while !got.windows(4).any(|w| w == b"ack\n") {
            match self.ack.read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline || self.child.try_wait()?.is_some() {
                        return Err(io::Error::other(format!("perf did not acknowledge {word}")));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Starts counting (returns once perf has acknowledged).
    pub fn enable(&mut self) -> io::Result<()> {
        self.command("enable")
    }

    /// Stops counting, ends perf and returns the counts.
    pub fn finish(mut self) -> io::Result<SyscallCounts> {
        let disabled = self.command("disable");
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGINT);
        let mut err = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            stderr.read_to_string(&mut err)?;
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
        disabled?;
        parse(&err).ok_or_else(|| io::Error::other(format!("perf stat printed no counts: {err}")))
    }
}

/// Counts from `perf stat -x,` output; `None` if an event is missing or was not counted.
pub fn parse(text: &str) -> Option<SyscallCounts> {
    let count = |event: &str| {
        text.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            (fields.get(2) == Some(&event))
                .then(|| fields[0].parse::<u64>().ok())
                .flatten()
        })
    };
    Some(SyscallCounts {
        uring_enters: count(ENTER_EVENT)?,
        syscalls: count(ALL_EVENT)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_perf_csv_and_refuses_uncounted_events() {
        let out = "Events disabled\nEvents enabled\n\
                   12345,,syscalls:sys_enter_io_uring_enter,694166,100.00,,\n\
                   99999,,raw_syscalls:sys_enter,694166,100.00,,\n";
        assert_eq!(
            parse(out),
            Some(SyscallCounts {
                uring_enters: 12345,
                syscalls: 99999
            })
        );
        let uncounted = "<not counted>,,syscalls:sys_enter_io_uring_enter,0,100.00,,\n\
                         5,,raw_syscalls:sys_enter,1,100.00,,\n";
        assert_eq!(parse(uncounted), None);
        assert_eq!(parse(""), None);
    }
}
