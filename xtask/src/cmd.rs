//! Running processes: plain, and with stdout streamed line by line to a callback.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::json::Json;

pub type Result<T> = std::result::Result<T, String>;

/// The repository root (xtask lives in `<root>/xtask`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the repository")
        .to_path_buf()
}

/// The cargo that runs us (`cargo xtask` sets `CARGO`), so toolchain overrides carry over.
pub fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(repo_root());
    c
}

pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` with inherited stdio; Ok only on exit status 0.
pub fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: $ {}", describe(cmd));
    let status = cmd
        .status()
        .map_err(|e| format!("could not start `{}`: {e}", describe(cmd)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({status})", describe(cmd)))
    }
}

/// How a streamed command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    pub status: ExitStatus,
    /// It was killed for running past its time limit.
    pub timed_out: bool,
}

/// Runs `cmd`, echoing its stdout line by line to our stdout (stderr inherited) and handing
/// each line to `on_line`. With `limit`, the command is killed when it runs longer.
pub fn run_streaming(
    cmd: &mut Command,
    limit: Option<Duration>,
    on_line: impl FnMut(&str),
) -> Result<Finished> {
    run_streaming_to(cmd, limit, &mut std::io::stdout(), on_line)
}

pub fn run_streaming_to(
    cmd: &mut Command,
    limit: Option<Duration>,
    echo: &mut impl Write,
    mut on_line: impl FnMut(&str),
) -> Result<Finished> {
    eprintln!("xtask: $ {}", describe(cmd));
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start `{}`: {e}", describe(cmd)))?;
    let stdout = child.stdout.take().expect("stdout was piped");
    let child = Arc::new(Mutex::new(child));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let watchdog = limit.map(|limit| {
        let child = Arc::clone(&child);
        thread::spawn(move || {
            if done_rx.recv_timeout(limit) == Err(RecvTimeoutError::Timeout) {
                eprintln!("xtask: killing it after {}s", limit.as_secs());
                let _ = child.lock().expect("child lock").kill();
                return true;
            }
            false
        })
    });
    for line in BufReader::new(stdout).split(b'\n') {
        let line = line.map_err(|e| format!("reading output of `{}`: {e}", describe(cmd)))?;
        let line = String::from_utf8_lossy(&line);
        // The VM's consoles are ttys: their lines end in \r\n.
        let line = line.strip_suffix('\r').unwrap_or(&line);
        // Echo failures (a closed pipe) must not stop the child from being reaped.
        let _ = writeln!(echo, "{line}");
        let _ = echo.flush();
        on_line(line);
    }
    drop(done_tx);
    let timed_out = watchdog.is_some_and(|w| w.join().unwrap_or(false));
    let status = child
        .lock()
        .expect("child lock")
        .wait()
        .map_err(|e| format!("waiting for `{}`: {e}", describe(cmd)))?;
    Ok(Finished { status, timed_out })
}

/// Runs `cmd` and returns its exit status and stdout (stderr inherited).
pub fn status_and_output(cmd: &mut Command) -> Result<(ExitStatus, String)> {
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start `{}`: {e}", describe(cmd)))?;
    let text = String::from_utf8(out.stdout)
        .map_err(|_| format!("`{}` printed non-UTF-8", describe(cmd)))?;
    Ok((out.status, text))
}

/// Runs `cmd` and returns its stdout (stderr inherited); Err unless it exits with 0.
pub fn output(cmd: &mut Command) -> Result<String> {
    let (status, text) = status_and_output(cmd)?;
    if !status.success() {
        return Err(format!("`{}` failed ({status})", describe(cmd)));
    }
    Ok(text)
}

/// The workspace's target directory (honours CARGO_TARGET_DIR and cargo config).
pub fn target_dir() -> Result<PathBuf> {
    let text = output(cargo().args(["metadata", "--format-version", "1", "--no-deps"]))?;
    let meta = Json::parse(&text).map_err(|e| format!("cargo metadata: {e}"))?;
    meta.get("target_directory")
        .and_then(Json::as_str)
        .map(PathBuf::from)
        .ok_or_else(|| "cargo metadata has no target_directory".to_string())
}

/// Quotes `s` for a POSIX shell.
pub fn shell_quote(s: impl AsRef<OsStr>) -> String {
    let s = s.as_ref().to_string_lossy();
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return s.into_owned();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_leaves_plain_words_and_quotes_the_rest() {
        assert_eq!(shell_quote("/a/b-c_d.rs"), "/a/b-c_d.rs");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
    }

    #[test]
    fn streaming_hands_over_every_line_and_the_status() {
        let mut lines = Vec::new();
        let mut echo = Vec::new();
        let done = run_streaming_to(
            Command::new("sh").args(["-c", "echo one; printf 'two\\r\\n'; exit 3"]),
            None,
            &mut echo,
            |l| lines.push(l.to_string()),
        )
        .unwrap();
        assert_eq!(lines, ["one", "two"]);
        assert_eq!(echo, b"one\ntwo\n");
        assert_eq!(done.status.code(), Some(3));
        assert!(!done.timed_out);
    }

    #[test]
    fn streaming_kills_a_command_past_its_limit() {
        let started = std::time::Instant::now();
        let done = run_streaming_to(
            Command::new("sleep").arg("30"),
            Some(Duration::from_millis(200)),
            &mut Vec::new(),
            |_| {},
        )
        .unwrap();
        assert!(done.timed_out);
        assert!(!done.status.success());
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
