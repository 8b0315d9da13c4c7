//! The two-VM fault suite (`vm/two-vm.sh faults`): a client VM sees its
//! server VM killed mid-stream and then the link between them cut for longer than the retry
//! budget. `cargo xtask test` runs it after the RDMA tests (about 30 s on a loaded 2-core
//! machine); `cargo xtask vm-faults` runs it alone.

use std::process::Command;
use std::time::Duration;

use crate::cmd::{self, Result};
use crate::tally::Tally;
use crate::vm;

/// The whole suite (two VM boots after the first, a link cut) must not hang CI.
const LIMIT: Duration = Duration::from_secs(900);

/// Faults the client reported as passed and as failed, from its JSON lines
/// (`{"event":"fault",...,"ok":true,...}`, examples/rdma_faults.rs).
pub fn count(client_out: &str) -> (u64, u64) {
    let faults = client_out
        .lines()
        .filter(|l| l.contains("\"event\":\"fault\""));
    faults.fold((0, 0), |(ok, bad), l| {
        if l.contains("\"ok\":true") {
            (ok + 1, bad)
        } else {
            (ok, bad + 1)
        }
    })
}

/// Runs the suite; its outputs stay in `target/xtask/two-vm-faults/`. Each fault the client
/// checked counts as a test; an exit status that no failed fault explains is a problem.
pub fn run(tally: &mut Tally) -> Result<()> {
    let out = cmd::target_dir()?.join("xtask/two-vm-faults");
    let _ = std::fs::remove_dir_all(&out);
    let script = cmd::repo_root().join("vm/two-vm.sh");
    let finished = cmd::run_streaming(
        Command::new(&script)
            .arg("faults")
            .arg(&out)
            .current_dir(cmd::repo_root()),
        Some(LIMIT),
        |_| {},
    )?;
    let client = std::fs::read_to_string(out.join("client.out")).unwrap_or_default();
    let (ok, bad) = count(&client);
    tally.passed += ok;
    tally.failed += bad;
    if bad > 0 {
        tally.failing_binary("two-VM fault suite (vm/two-vm.sh faults)", bad);
    }
    let code = finished.status.code();
    if code != Some(0) && bad == 0 {
        tally.problem(format!(
            "the two-VM fault suite ended with status {code:?} ({}); outputs in {}",
            vm::explain_status(code),
            out.display()
        ));
    } else if code == Some(0) && ok < 2 {
        tally.problem(format!(
            "the two-VM fault suite passed with only {ok} fault(s) checked; outputs in {}",
            out.display()
        ));
    }
    Ok(())
}

/// `cargo xtask vm-faults`.
pub fn vm_faults() -> Result<i32> {
    let mut tally = Tally::default();
    run(&mut tally)?;
    println!("{}", tally.summary());
    Ok(if tally.ok() { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn counts_fault_lines_only() {
        let out = "{\"event\":\"steady\",\"fault\":\"server_kill\"}\n\
                   {\"event\":\"fault\",\"fault\":\"server_kill\",\"ok\":true}\n\
                   {\"event\":\"reconnect\",\"ok\":false}\n\
                   {\"event\":\"fault\",\"fault\":\"link_cut\",\"ok\":false}\n";
        assert_eq!(count(out), (1, 1));
        assert_eq!(count(""), (0, 0));
    }
}
