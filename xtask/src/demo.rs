//! `cargo xtask demo`: builds the examples in release mode and runs the demo.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd::{self, Result};
use crate::setup::setup;
use crate::vm;

// ================================================================================
// DEMO STEPS: the demo the README shows. Edit this function (and only this one)
// to change what `cargo xtask demo` does. Helpers on `Demo`:
//   d.example("name")            -> path of target/release/examples/name
//   d.host(&bin, &["args"])?     -> run on the host
//   d.in_vm(&bin, &["args"])?    -> run inside the soft-RoCE VM (rxe0 = 10.77.0.1)
//   d.vm_shell("script")?        -> run a bash script inside ONE VM (e.g. a server in
//                                   the background plus its client)
// ================================================================================
fn demo_steps(d: &Demo) -> Result<()> {
    // 1. The KV store on the host: redis-cli, redis-benchmark and the binary client.
    d.host(Path::new("bash"), &["demo/kv-tcp.sh"])?;
    // 2. The raw echo demo: 2 shards, handoff accept, fairness budgets.
    println!("\n== echo_demo (raw length-prefixed echo, 2 shards, least-connections handoff)");
    d.host(&d.example("echo_demo"), &[])?;
    // 3. RDMA, inside the soft-RoCE VM: the KV binary protocol and the echo service.
    println!("\n== booting the soft-RoCE VM for the RDMA part");
    d.vm_shell("bash demo/rdma.sh")
}
// ============================ end of DEMO STEPS =================================

/// Where the demo's binaries are, and how to run them.
pub struct Demo {
    examples_dir: PathBuf,
}

// Not every helper is used by the current demo steps; they are the toolbox for editing them.
#[allow(dead_code)]
impl Demo {
    /// A release example binary.
    pub fn example(&self, name: &str) -> PathBuf {
        self.examples_dir.join(name)
    }

    /// Runs `bin args...` on the host.
    pub fn host(&self, bin: &Path, args: &[&str]) -> Result<()> {
        cmd::run(Command::new(bin).args(args).current_dir(cmd::repo_root()))
    }

    /// Runs `bin args...` inside a fresh soft-RoCE VM (built on the host, run in the guest).
    pub fn in_vm(&self, bin: &Path, args: &[&str]) -> Result<()> {
        run_in_vm(vm::command(bin, args))
    }

    /// Runs a bash script inside one VM, e.g. `srv & sleep 1; client; wait`.
    pub fn vm_shell(&self, script: &str) -> Result<()> {
        run_in_vm(vm::command("bash", ["-c", script]))
    }
}

fn run_in_vm(mut c: Command) -> Result<()> {
    c.current_dir(cmd::repo_root());
    eprintln!("xtask: $ {}", cmd::describe(&c));
    let status = c
        .status()
        .map_err(|e| format!("could not start {}: {e}", vm::runner().display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{}` failed ({status}): {}",
            cmd::describe(&c),
            vm::explain_status(status.code())
        ))
    }
}

pub fn demo() -> Result<()> {
    setup()?;
    cmd::run(cmd::cargo().args(["build", "--release", "--workspace", "--bins", "--examples"]))?;
    let d = Demo {
        examples_dir: cmd::target_dir()?.join("release/examples"),
    };
    demo_steps(&d)
}
