//! Child processes for one measurement: a server started from a command line, waited for until
//! its port listens, stopped with SIGTERM; and a client run to completion under a deadline.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::listen;

const POLL: Duration = Duration::from_millis(10);

/// Why a child process step failed.
#[derive(Debug)]
pub enum ProcessError {
    Spawn {
        command: String,
        error: std::io::Error,
    },
    /// The server exited before listening.
    Exited { status: ExitStatus, stderr: String },
    /// The server never listened on its port.
    NotListening { port: u16, after: Duration },
    /// The client ran past its deadline and was killed.
    ClientTimeout { after: Duration },
    /// The client printed no JSON line.
    NoReport { status: ExitStatus, stderr: String },
}

impl fmt::Display for ProcessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessError::Spawn { command, error } => write!(f, "cannot run {command:?}: {error}"),
            ProcessError::Exited { status, stderr } => {
                write!(f, "server exited early ({status}); stderr: {stderr}")
            }
            ProcessError::NotListening { port, after } => {
                write!(f, "nothing listened on port {port} within {after:?}")
            }
            ProcessError::ClientTimeout { after } => write!(f, "client killed after {after:?}"),
            ProcessError::NoReport { status, stderr } => {
                write!(
                    f,
                    "client printed no JSON report ({status}); stderr: {stderr}"
                )
            }
        }
    }
}

impl std::error::Error for ProcessError {}

/// Runs `command` through `sh -c exec …` so the child's pid is the program's own (taskset also
/// execs), in its own process group so a forced kill reaches anything it spawned.
fn spawn(command: &str) -> Result<Child, ProcessError> {
    Command::new("sh")
        .arg("-c")
        .arg(format!("exec {command}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|error| ProcessError::Spawn {
            command: command.to_string(),
            error,
        })
}

fn collect_lines<R: Read + Send + 'static>(pipe: Option<R>) -> JoinHandle<Vec<String>> {
    thread::spawn(move || match pipe {
        Some(p) => BufReader::new(p).lines().map_while(Result::ok).collect(),
        None => Vec::new(),
    })
}

fn tail(lines: &[String], n: usize) -> String {
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// What a server printed by the time it exited.
#[derive(Debug)]
pub struct ServerExit {
    pub stdout: Vec<String>,
    pub stderr: Vec<String>,
    pub status: Option<ExitStatus>,
    /// SIGTERM was not enough: the server was SIGKILLed.
    pub killed: bool,
}

/// A running server. Dropped without [`ServerProcess::stop`] (e.g. a panicking test), it kills
/// its process group so no server outlives its run.
pub struct ServerProcess {
    child: Child,
    stdout: Option<JoinHandle<Vec<String>>>,
    stderr: Option<JoinHandle<Vec<String>>>,
    /// Set once the child has been waited for.
    reaped: bool,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = kill(Pid::from_raw(-(self.child.id() as i32)), Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

impl ServerProcess {
    /// Starts `command` and waits until at least one socket listens on `port` and the count of
    /// listeners (one per shard with SO_REUSEPORT) has been stable for `settle`.
    pub fn start(
        command: &str,
        port: u16,
        timeout: Duration,
        settle: Duration,
    ) -> Result<ServerProcess, ProcessError> {
        let mut child = spawn(command)?;
        let stdout = collect_lines(child.stdout.take());
        let stderr = collect_lines(child.stderr.take());
        let mut server = ServerProcess {
            child,
            stdout: Some(stdout),
            stderr: Some(stderr),
            reaped: false,
        };
        match server.wait_listening(port, timeout, settle) {
            Ok(()) => Ok(server),
            Err(e) => {
                let exit = server.stop(Duration::from_secs(2));
                Err(match e {
                    ProcessError::Exited { status, .. } => ProcessError::Exited {
                        status,
                        stderr: tail(&exit.stderr, 5),
                    },
                    other => other,
                })
            }
        }
    }

    fn wait_listening(
        &mut self,
        port: u16,
        timeout: Duration,
        settle: Duration,
    ) -> Result<(), ProcessError> {
        let start = Instant::now();
        let mut seen = 0;
        let mut stable_since = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(ProcessError::Exited {
                    status,
                    stderr: String::new(),
                });
            }
            let now = listen::listeners_on(port);
            if now != seen {
                seen = now;
                stable_since = Instant::now();
            } else if seen > 0 && stable_since.elapsed() >= settle {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(ProcessError::NotListening {
                    port,
                    after: timeout,
                });
            }
            thread::sleep(POLL);
        }
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM, waits up to `grace`, then SIGKILLs the process group.
    pub fn stop(mut self, grace: Duration) -> ServerExit {
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        let mut status = None;
        let mut killed = false;
        while status.is_none() {
            match self.child.try_wait() {
                Ok(Some(s)) => status = Some(s),
                Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
                _ => {
                    killed = true;
                    // The negative pid addresses the process group created at spawn.
                    let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
                    status = self.child.wait().ok();
                    break;
                }
            }
        }
        self.reaped = true;
        let lines =
            |h: Option<JoinHandle<Vec<String>>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        ServerExit {
            stdout: lines(self.stdout.take()),
            stderr: lines(self.stderr.take()),
            status,
            killed,
        }
    }
}

/// A client's JSON report and exit.
#[derive(Debug)]
pub struct ClientRun {
    pub report: serde_json::Value,
    pub status: ExitStatus,
    pub stderr: Vec<String>,
}

/// Runs a client command to completion (killing it after `timeout`) and parses the last line
/// of its stdout that is a JSON object.
pub fn run_client(command: &str, timeout: Duration) -> Result<ClientRun, ProcessError> {
    let mut child = spawn(command)?;
    let stdout = collect_lines(child.stdout.take());
    let stderr = collect_lines(child.stderr.take());
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < timeout => thread::sleep(POLL),
            _ => {
                let _ = kill(Pid::from_raw(-(child.id() as i32)), Signal::SIGKILL);
                let _ = child.wait();
                return Err(ProcessError::ClientTimeout { after: timeout });
            }
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let report = stdout
        .iter()
        .rev()
        .filter(|l| l.trim_start().starts_with('{'))
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    match report {
        Some(report) => Ok(ClientRun {
            report,
            status,
            stderr,
        }),
        None => Err(ProcessError::NoReport {
            status,
            stderr: tail(&stderr, 5),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_report_is_the_last_json_line() {
        let run = run_client(
            "sh -c 'echo noise; echo \"{\\\"qps\\\": 1}\"; echo \"{\\\"qps\\\": 2}\"; echo oops >&2'",
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(run.report["qps"], 2);
        assert_eq!(run.stderr, vec!["oops"]);
        assert!(matches!(
            run_client("echo none", Duration::from_secs(10)),
            Err(ProcessError::NoReport { .. })
        ));
        assert!(matches!(
            run_client("sleep 5", Duration::from_millis(100)),
            Err(ProcessError::ClientTimeout { .. })
        ));
    }

    #[test]
    fn server_start_fails_cleanly() {
        // The success path runs against the real peers in tests/end_to_end.rs.
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let err = ServerProcess::start("exit 3", port, Duration::from_secs(5), POLL).err();
        assert!(matches!(err, Some(ProcessError::Exited { .. })));
        let err = ServerProcess::start("sleep 30", port, Duration::from_millis(100), POLL).err();
        assert!(matches!(err, Some(ProcessError::NotListening { .. })));
    }

    #[test]
    fn a_dropped_server_is_killed() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // `sleep` never listens; the port listens through `listener`, so start succeeds.
        let server = ServerProcess::start("sleep 30", port, Duration::from_secs(5), POLL).unwrap();
        let pid = Pid::from_raw(server.pid() as i32);
        drop(server);
        // Reaped by the drop: the pid no longer names a process (or a zombie) of ours.
        assert_eq!(kill(pid, None), Err(nix::errno::Errno::ESRCH));
    }
}
