//! Project tasks: `cargo xtask setup | test | vm | vm-faults | demo | gen-verbs`. Std only,
//! so it builds in seconds and does not depend on the crates it tests.

mod cmd;
mod demo;
mod faults;
mod hidden;
mod json;
mod publish;
mod setup;
mod tally;
mod test_runner;
mod vm;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command>

  setup                       check the Debian packages the project needs; install the
                              missing ones (as root) or print the apt-get line to run
  test [--host-only|--vm-only] [TEST ARGS...]
                              build every test; run host tests on the host, doc tests, and
                              test targets named rdma* in one soft-RoCE VM; TEST ARGS (a
                              name filter, --nocapture, ...) go to every test binary.
                              Ends with `N passed, M failed`. Without TEST ARGS
                              the VM part ends with the two-VM fault suite.
  vm -- CMD [ARGS...]         run CMD inside the soft-RoCE VM (rxe0 at 10.77.0.1)
  vm-faults                   the two-VM fault suite alone (vm/two-vm.sh faults): server
                              VM killed mid-stream, link cut past the retry budget
  demo                        build the examples (release) and run the demo
  hidden -- CMD [ARGS...]     run CMD where rdma-core's headers and libraries, pkg-config
                              and libclang are hidden (a private mount namespace), as
                              `test` builds the docs, the packages and tests/downstream
  gen-verbs [--check]         regenerate corewire-verbs' committed rdma-core bindings
                              (verbs/src/sys/bindings.rs) from the installed headers; with
                              --check, fail when the committed file differs

VM knobs (environment): see vm/run-in-rxe-vm.sh (RXE_VM_SMP, RXE_VM_TIMEOUT, RXE_VM_VERBOSE, ...)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = match command.as_str() {
        "setup" => setup::setup().map(|()| 0),
        "test" => run_tests(rest),
        "vm" => {
            let rest = rest.strip_prefix(&["--".to_string()]).unwrap_or(rest);
            vm::vm(rest)
        }
        "demo" => demo::demo().map(|()| 0),
        "vm-faults" => faults::vm_faults(),
        "gen-verbs" => gen_verbs(rest).map(|()| 0),
        "hidden" => {
            let rest = rest.strip_prefix(&["--".to_string()]).unwrap_or(rest);
            run_hidden(rest)
        }
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(0)
        }
        other => Err(format!("unknown command `{other}`\n{USAGE}")),
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo xtask hidden -- CMD...`: CMD with the caller's stdio, rdma-core and libclang hidden.
fn run_hidden(args: &[String]) -> cmd::Result<i32> {
    let Some((program, rest)) = args.split_first() else {
        return Err("usage: cargo xtask hidden -- CMD [ARGS...]".into());
    };
    let status = hidden::command(program, rest)
        .status()
        .map_err(|e| format!("could not start unshare: {e}"))?;
    Ok(status.code().unwrap_or(1))
}

/// `cargo xtask gen-verbs [--check]`: runs the generator (verbs/gen), which needs libclang
/// and rdma-core's headers (`cargo xtask setup` installs them).
fn gen_verbs(args: &[String]) -> cmd::Result<()> {
    match args {
        [] => {}
        [a] if a == "--check" => {}
        _ => return Err(format!("usage: cargo xtask gen-verbs [--check]\n{USAGE}")),
    }
    cmd::run(&mut gen_verbs_command(args))
}

/// The generator's command line (`cargo run -p corewire-verbs-gen -- ARGS`).
pub fn gen_verbs_command(args: &[String]) -> std::process::Command {
    let mut c = cmd::cargo();
    c.args(["run", "-q", "-p", "corewire-verbs-gen", "--"])
        .args(args);
    c
}

fn run_tests(args: &[String]) -> cmd::Result<i32> {
    let opts = test_runner::TestOptions::parse(args)?;
    setup::setup()?;
    let tally = test_runner::test(&opts)?;
    if !tally.failing.is_empty() {
        eprintln!("xtask: failed tests in:");
        for (what, n) in &tally.failing {
            eprintln!("  - {what}: {n} failed");
        }
    }
    if !tally.problems.is_empty() {
        eprintln!("xtask: {} problem(s):", tally.problems.len());
        for p in &tally.problems {
            eprintln!("  - {p}");
        }
    }
    println!("{}", tally.summary());
    Ok(if tally.ok() { 0 } else { 1 })
}
