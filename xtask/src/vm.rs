//! The soft-RoCE VM (vm/run-in-rxe-vm.sh): a qemu guest with rxe0 at 10.77.0.1 that sees the
//! host filesystem, so host-built binaries run there unchanged.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;

use crate::cmd::{self, Result};

pub fn runner() -> PathBuf {
    cmd::repo_root().join("vm/run-in-rxe-vm.sh")
}

/// A command that runs `program args...` inside a fresh VM (2 vCPUs unless RXE_VM_SMP says
/// otherwise: polling tests need two). Its exit status is the guest command's; 125 means
/// the VM itself failed, 124 a timeout.
pub fn command<I, S>(program: impl AsRef<OsStr>, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut c = Command::new(runner());
    if std::env::var_os("RXE_VM_SMP").is_none() {
        c.env("RXE_VM_SMP", "2");
    }
    c.arg(program).args(args);
    c
}

/// What a VM exit status means, for messages.
pub fn explain_status(code: Option<i32>) -> &'static str {
    match code {
        Some(0) => "ok",
        Some(124) => "VM timed out (RXE_VM_TIMEOUT)",
        Some(125) => "VM failed to boot or report (see messages above)",
        Some(126) => "guest could not cd to the working directory",
        None => "killed by a signal",
        Some(_) => "command failed in the VM",
    }
}

/// `cargo xtask vm -- CMD...`: runs CMD in the VM with the caller's stdio.
pub fn vm(args: &[String]) -> Result<i32> {
    let Some((program, rest)) = args.split_first() else {
        return Err("usage: cargo xtask vm -- CMD [ARGS...]".into());
    };
    eprintln!("xtask: booting the rxe VM for `{}`", args.join(" "));
    let status = command(program, rest)
        .status()
        .map_err(|e| format!("could not start {}: {e}", runner().display()))?;
    let code = status.code();
    if code != Some(0) {
        eprintln!("xtask vm: exit status {code:?}: {}", explain_status(code));
    }
    Ok(code.unwrap_or(1))
}
