//! `cargo xtask test`: every test of the workspace, host tests on the host and RDMA tests
//! (test targets named `rdma*`) in one soft-RoCE VM, with one verdict at the end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::cmd::{self, shell_quote, Result};
use crate::json::Json;
use crate::publish;
use crate::tally::{parse_result_line, ResultLine, Tally};
use crate::vm;

/// Test targets whose name starts with this need an RDMA device and run in the VM.
pub const RDMA_PREFIX: &str = "rdma";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestBinary {
    /// Cargo target name (`rdma_verbs`, or the crate name for unit tests).
    pub name: String,
    pub exe: PathBuf,
    /// The package directory: cargo runs tests there, with CARGO_MANIFEST_DIR set to it.
    pub package_dir: PathBuf,
}

impl TestBinary {
    pub fn needs_rdma(&self) -> bool {
        self.name.starts_with(RDMA_PREFIX)
    }
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct TestOptions {
    pub host: bool,
    pub vm: bool,
    /// Handed to every test binary (a name filter, `--nocapture`, ...).
    pub test_args: Vec<String>,
}

impl TestOptions {
    pub fn parse(args: &[String]) -> Result<TestOptions> {
        let mut o = TestOptions {
            host: true,
            vm: true,
            test_args: Vec::new(),
        };
        for a in args {
            match a.as_str() {
                "--host-only" => o.vm = false,
                "--vm-only" => o.host = false,
                "--" => {}
                _ => o.test_args.push(a.clone()),
            }
        }
        if !o.host && !o.vm {
            return Err("--host-only and --vm-only exclude each other".into());
        }
        Ok(o)
    }
}

/// Test executables from `cargo test --no-run --message-format=json` output.
pub fn parse_artifacts(json_lines: &str) -> Vec<TestBinary> {
    let mut bins = BTreeMap::new();
    for line in json_lines.lines().filter(|l| l.starts_with('{')) {
        let Ok(msg) = Json::parse(line) else { continue };
        if msg.get("reason").and_then(Json::as_str) != Some("compiler-artifact") {
            continue;
        }
        let is_test = msg
            .get("profile")
            .and_then(|p| p.get("test"))
            .and_then(Json::as_bool)
            == Some(true);
        let exe = msg.get("executable").and_then(Json::as_str);
        let name = msg
            .get("target")
            .and_then(|t| t.get("name"))
            .and_then(Json::as_str);
        let manifest = msg.get("manifest_path").and_then(Json::as_str);
        if let (true, Some(exe), Some(name), Some(manifest)) = (is_test, exe, name, manifest) {
            let package_dir = Path::new(manifest)
                .parent()
                .unwrap_or(Path::new("."))
                .to_path_buf();
            bins.insert(
                (package_dir.clone(), name.to_string(), exe.to_string()),
                TestBinary {
                    name: name.to_string(),
                    exe: PathBuf::from(exe),
                    package_dir,
                },
            );
        }
    }
    bins.into_values().collect()
}

/// Builds every test target. `--no-fail-fast` keeps building the other packages when one
/// fails, so the tests that do build still run (the build failure is still a failure).
fn build_tests(tally: &mut Tally) -> Vec<TestBinary> {
    let started = Instant::now();
    let mut c = cmd::cargo();
    c.args([
        "test",
        "--workspace",
        "--no-run",
        "--no-fail-fast",
        "--message-format=json-render-diagnostics",
    ]);
    let (status, out) = match cmd::status_and_output(&mut c) {
        Ok(r) => r,
        Err(e) => {
            tally.problem(e);
            return Vec::new();
        }
    };
    let bins = parse_artifacts(&out);
    eprintln!(
        "xtask: built {} test binaries in {:.1}s",
        bins.len(),
        started.elapsed().as_secs_f64()
    );
    if !status.success() {
        tally.problem(format!(
            "building the tests failed (`{}`: {status}); running the {} that built",
            cmd::describe(&c),
            bins.len()
        ));
    }
    bins
}

/// Per-binary bookkeeping of what its output said.
#[derive(Default)]
struct Seen {
    result: Option<ResultLine>,
}

fn judge(tally: &mut Tally, what: &str, status: Option<i32>, seen: &Seen) {
    match (status, seen.result) {
        // A failing test exits 101 after its summary: the failure is already counted.
        (_, Some(r)) if r.failed > 0 => tally.failing_binary(what, r.failed),
        (Some(0), _) => {}
        (code, _) => tally.problem(format!(
            "{what} exited with {} without reporting a failed test",
            code.map_or("a signal".to_string(), |c| format!("status {c}"))
        )),
    }
}

/// Per host test binary: a hung test must not hang CI. `XTASK_TEST_TIMEOUT` (seconds)
/// overrides it.
const DEFAULT_TEST_TIMEOUT: Duration = Duration::from_secs(600);

fn test_timeout() -> Duration {
    std::env::var("XTASK_TEST_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(DEFAULT_TEST_TIMEOUT, Duration::from_secs)
}

/// The packages that do I/O through the driver, whose host tests run again under each
/// io_uring fallback and on the epoll backend: `corewire` itself (`""`: services, the compat
/// adapters, TCP fallback), the runtime, the transports and the KV store. The others are
/// sans-I/O (`wire`), RDMA-only (`verbs`, run in the VM) or tooling (`benches`, `xtask`,
/// `macros`).
const FALLBACK_PACKAGES: &[&str] = &["", "runtime", "transport", "examples/kv"];

/// The driver's own packages: what a change in how receives complete can break is tested
/// there (the buffer ring, its bundles, cancel-safe receives), not by the KV store's
/// command tests above them.
const DRIVER_PACKAGES: &[&str] = &["", "runtime", "transport"];

/// The environments the host tests run again under, each over the packages it can break.
///
/// `COREWIRE_IO_URING=plain` forces every fallback at once (no set-up flags, no buffer ring,
/// single-shot receives, no multishot accept, zero-copy send or MSG_RING), as on an old
/// kernel; `COREWIRE_BACKEND=epoll` runs everything on the epoll backend, as where io_uring
/// is blocked (seccomp, `kernel.io_uring_disabled`): both change every path the KV store
/// takes, so they cover [`FALLBACK_PACKAGES`]. `COREWIRE_IO_URING=nobundle` keeps the buffer
/// ring with one buffer per completion, as on kernels 6.0–6.9, which the host (6.10+) would
/// otherwise never exercise: it only changes how many buffers one receive completion
/// carries, so it covers [`DRIVER_PACKAGES`] (which keeps CI's time within its budget).
const HOST_RERUNS: [(&str, &str, &[&str]); 3] = [
    ("COREWIRE_IO_URING", "plain", FALLBACK_PACKAGES),
    ("COREWIRE_IO_URING", "nobundle", DRIVER_PACKAGES),
    ("COREWIRE_BACKEND", "epoll", FALLBACK_PACKAGES),
];

fn in_packages(bin: &TestBinary, packages: &[&str]) -> bool {
    let root = cmd::repo_root();
    packages.iter().any(|p| bin.package_dir == root.join(p))
}

fn run_host(
    bins: &[&TestBinary],
    test_args: &[String],
    env: Option<(&str, &str)>,
    tally: &mut Tally,
) {
    let limit = test_timeout();
    for bin in bins {
        let mut seen = Seen::default();
        let mut command = Command::new(&bin.exe);
        command
            .args(test_args)
            .current_dir(&bin.package_dir)
            .env("CARGO_MANIFEST_DIR", &bin.package_dir);
        if let Some((k, v)) = env {
            command.env(k, v);
        }
        let finished = cmd::run_streaming(&mut command, Some(limit), |line| {
            if let Some(r) = parse_result_line(line) {
                tally.add(r);
                seen.result = Some(r);
            }
        });
        let what = match env {
            Some((k, v)) => format!("test binary {} ({k}={v})", bin.name),
            None => format!("test binary {}", bin.name),
        };
        match finished {
            Ok(f) if f.timed_out => tally.problem(format!(
                "{what} ran longer than {}s and was killed (XTASK_TEST_TIMEOUT)",
                limit.as_secs()
            )),
            Ok(f) => judge(tally, &what, f.status.code(), &seen),
            Err(e) => tally.problem(e),
        }
    }
}

fn run_doc_tests(test_args: &[String], tally: &mut Tally) {
    let mut c = cmd::cargo();
    c.args(["test", "--workspace", "--doc"]);
    if !test_args.is_empty() {
        c.arg("--").args(test_args);
    }
    let mut seen = Seen::default();
    let mut failed = 0;
    match cmd::run_streaming(&mut c, None, |line| {
        if let Some(r) = parse_result_line(line) {
            tally.add(r);
            failed += r.failed;
            seen.result = Some(ResultLine { passed: 0, failed });
        }
    }) {
        Ok(f) => judge(tally, "cargo test --doc", f.status.code(), &seen),
        Err(e) => tally.problem(e),
    }
}

/// The transport builds without its `rdma` feature: keeps the RDMA transport the one part
/// that needs verbs (corewire-verbs is then not in the build at all).
fn check_without_rdma(tally: &mut Tally) {
    let mut c = cmd::cargo();
    c.args(["check", "-p", "corewire-transport", "--no-default-features"]);
    match cmd::run_streaming(&mut c, None, |_| {}) {
        Ok(f) if f.status.success() => {}
        Ok(f) => tally.problem(format!(
            "`cargo check -p corewire-transport --no-default-features` failed ({})",
            f.status
        )),
        Err(e) => tally.problem(e),
    }
}

/// corewire-verbs' committed bindings are what bindgen makes from the installed rdma-core
/// headers, and the installed libraries export every symbol version they use.
fn check_verbs_bindings(tally: &mut Tally) {
    let mut c = crate::gen_verbs_command(&["--check".to_string()]);
    match cmd::run_streaming(&mut c, None, |_| {}) {
        Ok(f) if f.status.success() => {}
        Ok(f) => tally.problem(format!(
            "`cargo xtask gen-verbs --check` failed ({}): see its message above",
            f.status
        )),
        Err(e) => tally.problem(e),
    }
}

/// An RDMA test binary the VM runs a second time: under `env`, and with `filters` (libtest
/// name filters, any of which selects a test) when some, else whole.
struct VmRerun {
    binary: &'static str,
    suffix: &'static str,
    env: (&'static str, &'static str),
    filters: &'static [&'static str],
}

/// The VM's reruns of the binaries whose shards wait on the completion channel through the
/// driver (event and adaptive modes): with `COREWIRE_IO_URING=plain` (a single-shot poll
/// behaves unlike the multishot one), and the event-mode tests on the epoll backend (the
/// channel in the shard's epoll set).
/// Replication over RDMA (`rdma_repl`) runs again on the epoll backend: its two corewire-kv
/// processes take their backend from the environment.
const VM_RERUNS: &[VmRerun] = &[
    VmRerun {
        binary: "rdma_transport",
        suffix: "plain",
        env: ("COREWIRE_IO_URING", "plain"),
        filters: &[],
    },
    VmRerun {
        binary: "rdma_transport",
        suffix: "epoll",
        env: ("COREWIRE_BACKEND", "epoll"),
        filters: &[
            "event_mode",
            "adaptive",
            "solicited",
            "mode_can_be_switched",
        ],
    },
    VmRerun {
        binary: "rdma_repl",
        suffix: "epoll",
        env: ("COREWIRE_BACKEND", "epoll"),
        filters: &[],
    },
];

/// One run in the VM: its name, the binary, the environment and filters of a rerun.
type VmRun<'a> = (String, &'a TestBinary, Option<&'static VmRerun>);

/// What the VM runs: each binary under its own name, then the reruns.
fn vm_runs<'a>(bins: &[&'a TestBinary]) -> Vec<VmRun<'a>> {
    let mut runs: Vec<VmRun<'a>> = bins.iter().map(|b| (b.name.clone(), *b, None)).collect();
    for rerun in VM_RERUNS {
        runs.extend(
            bins.iter()
                .filter(|b| b.name == rerun.binary)
                .map(|b| (format!("{}-{}", b.name, rerun.suffix), *b, Some(rerun))),
        );
    }
    runs
}

/// The script the VM runs: each RDMA test binary in its package dir, between markers that
/// tell xtask which binaries actually ran.
pub fn vm_script(bins: &[&TestBinary], test_args: &[String]) -> String {
    let mut s = String::from(
        "#!/bin/bash\n\
         # generated by `cargo xtask test`: runs the RDMA test binaries inside the rxe VM\n\
         echo \"xtask-vm: uptime $(cut -d' ' -f1 /proc/uptime)\"\n\
         fail=0\n\
         run() { # NAME DIR EXE ARGS...\n  \
           local name=$1 dir=$2 exe=$3; shift 3\n  \
           echo \"xtask-vm: start $name\"\n  \
           (cd \"$dir\" && CARGO_MANIFEST_DIR=\"$dir\" exec \"$exe\" \"$@\"); local rc=$?\n  \
           echo \"xtask-vm: end $name rc=$rc\"\n  \
           [ $rc = 0 ] || fail=1\n\
         }\n",
    );
    for (name, b, rerun) in vm_runs(bins) {
        s.push_str("run");
        let mut words = vec![shell_quote(&name), shell_quote(&b.package_dir)];
        if let Some(rerun) = rerun {
            // `run` execs its third word: env sets the mode for that binary only.
            words.push("env".into());
            words.push(format!("{}={}", rerun.env.0, rerun.env.1));
        }
        words.push(shell_quote(&b.exe));
        // The caller's arguments pick tests themselves; else a rerun's own filters.
        let filters = rerun.map_or(&[][..], |r| r.filters);
        if test_args.is_empty() {
            words.extend(filters.iter().map(shell_quote));
        }
        words.extend(test_args.iter().map(shell_quote));
        for word in words {
            s.push(' ');
            s.push_str(&word);
        }
        s.push('\n');
    }
    s.push_str("echo \"xtask-vm: uptime $(cut -d' ' -f1 /proc/uptime)\"\nexit $fail\n");
    s
}

/// What the VM's output said about the binaries it ran.
#[derive(Default, Debug)]
pub struct VmProgress {
    current: Option<String>,
    results: BTreeMap<String, (Option<i32>, Option<ResultLine>)>,
    uptimes: Vec<f64>,
}

impl VmProgress {
    /// Feeds one output line; returns the counts when it is a `test result:` line.
    pub fn line(&mut self, line: &str) -> Option<ResultLine> {
        if let Some(rest) = line.strip_prefix("xtask-vm: ") {
            if let Some(name) = rest.strip_prefix("start ") {
                self.current = Some(name.to_string());
                self.results.insert(name.to_string(), (None, None));
            } else if let Some(end) = rest.strip_prefix("end ") {
                if let Some((name, rc)) = end.rsplit_once(" rc=") {
                    let entry = self.results.entry(name.to_string()).or_default();
                    entry.0 = rc.parse().ok();
                }
                self.current = None;
            } else if let Some(t) = rest.strip_prefix("uptime ") {
                self.uptimes.extend(t.trim().parse::<f64>().ok());
            }
            return None;
        }
        let r = parse_result_line(line)?;
        if let Some(entry) = self.current.as_ref().and_then(|c| self.results.get_mut(c)) {
            entry.1 = Some(r);
        }
        Some(r)
    }
}

fn run_vm(bins: &[&TestBinary], test_args: &[String], tally: &mut Tally) -> Result<()> {
    if bins.is_empty() {
        tally.problem(format!(
            "no test target named `{RDMA_PREFIX}*` was built: the RDMA tests (e.g. \
             verbs/tests/rdma_verbs.rs) are expected to run in the VM"
        ));
        return Ok(());
    }
    let dir = cmd::target_dir()?.join("xtask");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let script = dir.join("rdma-tests.sh");
    std::fs::write(&script, vm_script(bins, test_args))
        .map_err(|e| format!("writing {}: {e}", script.display()))?;

    let started = Instant::now();
    let mut progress = VmProgress::default();
    let finished = cmd::run_streaming(
        vm::command("bash", [&script]).current_dir(cmd::repo_root()),
        None,
        |line| {
            if let Some(r) = progress.line(line) {
                tally.add(r);
            }
        },
    )?;
    let wall = started.elapsed().as_secs_f64();
    if let [boot, .., done] = progress.uptimes[..] {
        eprintln!(
            "xtask: VM took {wall:.1}s: guest ready after {boot:.1}s of guest uptime, \
             tests {:.1}s",
            done - boot
        );
    } else {
        eprintln!("xtask: VM took {wall:.1}s");
    }
    for (name, _, _) in vm_runs(bins) {
        match progress.results.get(&name) {
            None => tally.problem(format!("RDMA test binary {name} did not run in the VM")),
            Some((rc, result)) => judge(
                tally,
                &format!("RDMA test binary {name} (in the VM)"),
                *rc,
                &Seen { result: *result },
            ),
        }
    }
    // The script exits 1 when a binary failed (judged above); anything else is the VM's.
    let code = finished.status.code();
    if code != Some(0) && code != Some(1) {
        tally.problem(format!(
            "the VM run ended with status {code:?}: {}",
            vm::explain_status(code)
        ));
    }
    Ok(())
}

pub fn test(opts: &TestOptions) -> Result<Tally> {
    let mut tally = Tally::default();
    let bins = build_tests(&mut tally);
    let (rdma, host): (Vec<&TestBinary>, Vec<&TestBinary>) =
        bins.iter().partition(|b| b.needs_rdma());
    if opts.host {
        let started = Instant::now();
        run_host(&host, &opts.test_args, None, &mut tally);
        // Each io_uring fallback, over the test binaries that exercise it.
        for (var, mode, packages) in HOST_RERUNS {
            let again: Vec<&TestBinary> = host
                .iter()
                .copied()
                .filter(|b| in_packages(b, packages))
                .collect();
            eprintln!(
                "xtask: {} test binaries again with {var}={mode}",
                again.len()
            );
            run_host(&again, &opts.test_args, Some((var, mode)), &mut tally);
        }
        run_doc_tests(&opts.test_args, &mut tally);
        check_without_rdma(&mut tally);
        check_verbs_bindings(&mut tally);
        // What users get, where rdma-core and libclang are not installed.
        publish::check_docs(&mut tally);
        publish::check_package(&mut tally);
        publish::check_downstream(&mut tally, &opts.test_args);
        eprintln!(
            "xtask: host tests took {:.1}s",
            started.elapsed().as_secs_f64()
        );
    }
    if opts.vm {
        if let Err(e) = run_vm(&rdma, &opts.test_args, &mut tally) {
            tally.problem(e);
        }
        // A name filter picks tests; the fault suite is not one of them.
        if opts.test_args.is_empty() {
            let started = Instant::now();
            if let Err(e) = crate::faults::run(&mut tally) {
                tally.problem(e);
            }
            eprintln!(
                "xtask: two-VM fault suite took {:.1}s",
                started.elapsed().as_secs_f64()
            );
        } else {
            eprintln!("xtask: test arguments given: the two-VM fault suite is skipped");
        }
    }
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_split_modes_from_test_args() {
        let o = TestOptions::parse(&args(&["--vm-only", "migrate", "--", "--nocapture"])).unwrap();
        assert!(!o.host && o.vm);
        assert_eq!(o.test_args, ["migrate", "--nocapture"]);
        assert!(TestOptions::parse(&args(&["--vm-only", "--host-only"])).is_err());
        let all = TestOptions::parse(&[]).unwrap();
        assert!(all.host && all.vm && all.test_args.is_empty());
    }

    #[test]
    fn artifacts_keep_only_test_executables() {
        let out = concat!(
            r#"{"reason":"compiler-artifact","manifest_path":"/r/verbs/Cargo.toml","target":{"name":"rdma_verbs"},"profile":{"test":true},"executable":"/t/rdma_verbs-1"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","manifest_path":"/r/verbs/Cargo.toml","target":{"name":"corewire_verbs"},"profile":{"test":false},"executable":null}"#,
            "\n",
            r#"{"reason":"compiler-artifact","manifest_path":"/r/Cargo.toml","target":{"name":"echo"},"profile":{"test":false},"executable":"/t/examples/echo"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","manifest_path":"/r/verbs/Cargo.toml","target":{"name":"corewire_verbs"},"profile":{"test":true},"executable":"/t/corewire_verbs-2"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\n"
        );
        let bins = parse_artifacts(out);
        assert_eq!(bins.len(), 2);
        assert_eq!(bins[0].name, "corewire_verbs");
        assert!(!bins[0].needs_rdma());
        assert_eq!(bins[1].name, "rdma_verbs");
        assert!(bins[1].needs_rdma());
        assert_eq!(bins[1].package_dir, Path::new("/r/verbs"));
        assert_eq!(bins[1].exe, Path::new("/t/rdma_verbs-1"));
    }

    #[test]
    fn fallback_passes_cover_every_package_that_does_io() {
        let bin = |dir: &str| TestBinary {
            name: "t".into(),
            exe: "/t/t".into(),
            package_dir: cmd::repo_root().join(dir),
        };
        // The root package too: its directory is the repository's own.
        assert!(in_packages(
            &TestBinary {
                package_dir: cmd::repo_root(),
                ..bin("")
            },
            FALLBACK_PACKAGES
        ));
        for dir in ["runtime", "transport", "examples/kv"] {
            assert!(in_packages(&bin(dir), FALLBACK_PACKAGES), "{dir}");
        }
        for dir in ["verbs", "xtask", "wire", "benches", "macros", "examples"] {
            assert!(!in_packages(&bin(dir), FALLBACK_PACKAGES), "{dir}");
        }
    }

    #[test]
    fn vm_script_runs_each_binary_with_quoted_args() {
        let b = TestBinary {
            name: "rdma_verbs".into(),
            exe: "/t/rdma_verbs-1".into(),
            package_dir: "/r/my dir".into(),
        };
        let s = vm_script(&[&b], &args(&["it's"]));
        assert!(
            s.contains("run rdma_verbs '/r/my dir' /t/rdma_verbs-1 'it'\\''s'\n"),
            "{s}"
        );
        assert!(s.ends_with("exit $fail\n"));
        assert!(!s.contains("plain"), "{s}");
    }

    #[test]
    fn vm_script_runs_rdma_transport_again_with_the_plain_ring() {
        let b = TestBinary {
            name: "rdma_transport".into(),
            exe: "/t/rdma_transport-1".into(),
            package_dir: "/r".into(),
        };
        let s = vm_script(&[&b], &[]);
        assert!(
            s.contains("run rdma_transport /r /t/rdma_transport-1\n"),
            "{s}"
        );
        assert!(
            s.contains(
                "run rdma_transport-plain /r env COREWIRE_IO_URING=plain /t/rdma_transport-1\n"
            ),
            "{s}"
        );
        assert!(
            s.contains(
                "run rdma_transport-epoll /r env COREWIRE_BACKEND=epoll /t/rdma_transport-1 \
                 event_mode adaptive solicited mode_can_be_switched\n"
            ),
            "{s}"
        );
    }

    #[test]
    fn host_reruns_include_the_epoll_backend() {
        let covers_kv = |var: &str, mode: &str| {
            HOST_RERUNS
                .iter()
                .any(|&(v, m, p)| v == var && m == mode && p.contains(&"examples/kv"))
        };
        assert!(covers_kv("COREWIRE_BACKEND", "epoll"));
        assert!(covers_kv("COREWIRE_IO_URING", "plain"));
        assert!(HOST_RERUNS
            .iter()
            .any(|&(_, m, p)| m == "nobundle" && p.contains(&"runtime")));
    }

    #[test]
    fn vm_progress_tracks_markers_results_and_uptime() {
        let mut p = VmProgress::default();
        for l in [
            "xtask-vm: uptime 2.50",
            "xtask-vm: start rdma_verbs",
            "running 7 tests",
            "test result: ok. 7 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.55s",
            "xtask-vm: end rdma_verbs rc=0",
            "xtask-vm: uptime 3.25",
        ] {
            p.line(l);
        }
        assert_eq!(p.uptimes, [2.5, 3.25]);
        assert_eq!(
            p.results.get("rdma_verbs"),
            Some(&(
                Some(0),
                Some(ResultLine {
                    passed: 7,
                    failed: 0
                })
            ))
        );
    }

    #[test]
    fn nonzero_exit_without_counted_failure_is_a_problem() {
        let mut t = Tally::default();
        judge(&mut t, "a", Some(0), &Seen::default());
        judge(
            &mut t,
            "b",
            Some(101),
            &Seen {
                result: Some(ResultLine {
                    passed: 1,
                    failed: 1,
                }),
            },
        );
        assert!(t.problems.is_empty());
        assert_eq!(t.failing, [("b".to_string(), 1)]);
        judge(&mut t, "c", Some(139), &Seen::default());
        judge(&mut t, "d", None, &Seen::default());
        assert_eq!(t.problems.len(), 2);
    }
}
