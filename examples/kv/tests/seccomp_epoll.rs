//! Where io_uring is blocked, corewire programs start on epoll and say why. Each server runs
//! in a child process under a seccomp filter that makes the io_uring syscalls fail with EPERM
//! (what Docker's default profile and containerd's RuntimeDefault do), installed between fork
//! and exec; the test then serves real clients through it: `redis-cli` against corewire-kv,
//! the echo example's client against its server.

// `pre_exec` is unsafe: the hook runs in the forked child, where only async-signal-safe
// calls are allowed. The one below makes two syscalls (prctl, seccomp) and allocates nothing.
#![allow(unsafe_code)]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

use common::{redis_cli, Server};

/// A filter that lets everything through but io_uring_setup, io_uring_enter and
/// io_uring_register, which fail with EPERM.
fn no_io_uring() -> BpfProgram {
    let blocked = [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ];
    let rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> =
        blocked.into_iter().map(|nr| (nr, Vec::new())).collect();
    let arch = TargetArch::try_from(std::env::consts::ARCH).expect("a seccompiler target");
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .expect("filter");
    filter.try_into().expect("compiled filter")
}

/// Install [`no_io_uring`] in the child between fork and exec.
fn under_seccomp(command: &mut Command) {
    let program = no_io_uring();
    // SAFETY: the hook runs in the forked child before exec; it only calls prctl and seccomp
    // on a program compiled before the fork (no allocation, no lock), and turns a failure
    // into an errno without allocating.
    unsafe {
        command.pre_exec(move || {
            seccompiler::apply_filter(&program)
                .map_err(|_| std::io::Error::from_raw_os_error(libc::EPERM))
        });
    }
}

/// Under the filter with the backend left to `Auto` (the suite also runs with
/// `COREWIRE_BACKEND=epoll` set, which the child must not inherit here).
fn auto_under_seccomp(command: &mut Command) {
    command.env_remove("COREWIRE_BACKEND");
    under_seccomp(command);
}

fn assert_names_epoll_and_why(log: &str) {
    assert!(
        log.contains("runtime started on epoll")
            && log.contains("io_uring_setup: EPERM")
            && log.contains("seccomp"),
        "the log does not say the runtime is on epoll and why:\n{log}"
    );
}

#[test]
fn corewire_kv_serves_redis_cli_on_epoll_when_io_uring_is_blocked() {
    let mut server = Server::try_start_configured(&["--shards", "2"], &[], auto_under_seccomp)
        .unwrap_or_else(|e| panic!("corewire-kv did not start under the filter: {e}"));
    assert_eq!(redis_cli(server.port, &["set", "greeting", "hello"]), "OK");
    assert_eq!(redis_cli(server.port, &["get", "greeting"]), "hello");
    for i in 0..50 {
        let key = format!("k{i}");
        assert_eq!(redis_cli(server.port, &["incrby", &key, "2"]), "2");
    }
    assert_eq!(redis_cli(server.port, &["dbsize"]), "51");
    let info = redis_cli(server.port, &["info", "server"]);
    assert!(info.contains("multiplexing_api:epoll"), "{info}");
    server.stop();
    assert_names_epoll_and_why(&server.stderr());
}

/// An operator who forces io_uring where it is blocked gets an error that says why, not a
/// bare errno.
#[test]
fn forced_io_uring_fails_with_the_reason_when_it_is_blocked() {
    let mut command = Command::new(common::SERVER);
    command
        .args(["--port", "0", "--shards", "1"])
        .env("COREWIRE_BACKEND", "io_uring")
        .stdin(Stdio::null());
    under_seccomp(&mut command);
    let out = command.output().expect("running corewire-kv");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started anyway:\n{stderr}");
    assert!(
        stderr.contains("io_uring_setup: EPERM — blocked by seccomp or kernel.io_uring_disabled")
            && stderr.contains("COREWIRE_BACKEND=epoll"),
        "the error does not say why or what to do:\n{stderr}"
    );
}

/// The echo example's binaries, built next to this test by `cargo test` (examples are built
/// with the tests of their package).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build --example {name}` (cargo xtask test builds \
         every example)",
        path.display()
    );
    path
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_echo_server_serves_its_client_on_epoll_when_io_uring_is_blocked() {
    let dir = common::TempDir::new("seccomp-echo");
    let log_path = dir.path().join("stderr.log");
    let mut command = Command::new(example("echo_server"));
    command
        .args(["--addr", "127.0.0.1:0", "--shards", "1", "--no-pin"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).unwrap());
    auto_under_seccomp(&mut command);
    let mut server = Killed(command.spawn().expect("spawning echo_server"));
    let stdout = server.0.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        if let Some(Ok(line)) = lines.next() {
            let _ = tx.send(line);
        }
        for _ in lines {}
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| {
            panic!(
                "echo_server did not start under the filter:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            )
        });
    assert!(line.contains("backend=epoll"), "{line}");
    let addr = line
        .split_whitespace()
        .nth(3)
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    // The client runs under the filter too: a corewire program on epoll on both ends.
    let mut client = Command::new(example("echo_client"));
    client
        .args(["--addr", &addr, "--conns", "4", "--depth", "4"])
        .args(["--size", "4096", "--count", "4000"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null());
    auto_under_seccomp(&mut client);
    let out = client.output().expect("running echo_client");
    let client_log = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "echo_client failed ({}):\n{}\n{client_log}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    assert_names_epoll_and_why(&client_log);
    drop(server);
    assert_names_epoll_and_why(&std::fs::read_to_string(&log_path).unwrap());
}
