//! `cargo xtask setup`: makes sure the Debian packages the project needs are installed.

use std::process::Command;

use crate::cmd::{self, Result};

/// What the project needs on Debian 12, and why.
pub const PACKAGES: &[&str] = &[
    // the soft-RoCE VM (vm/): qemu, the Debian 6.1 kernel with rdma_rxe, busybox for /init,
    // tools build-initramfs.sh uses
    "qemu-system-x86",
    "linux-image-amd64",
    "busybox-static",
    "cpio",
    "kmod",
    "xz-utils",
    "zstd",
    "bc",
    "file",
    "iproute2",
    // rdma-core userspace inside the VM, and perftest for the reference numbers
    "rdma-core",
    "ibverbs-providers",
    "ibverbs-utils",
    "rdmacm-utils",
    "perftest",
    // `cargo xtask gen-verbs [--check]`: bindgen (libclang) over rdma-core's headers. Building
    // corewire-verbs needs none of these: its bindings are committed and rdma-core is
    // loaded at run time (the libraries come with rdma-core/ibverbs-providers above).
    "libibverbs-dev",
    "librdmacm-dev",
    "libclang-dev",
    "clang",
    // the linker rustc calls
    "build-essential",
    // the kv example and its benchmarks
    "redis-tools",
    "redis-server",
    // HTTP/1.1 keep-alive load for the hyper benchmark (BENCHMARKS.md)
    "wrk",
    // the kv cluster test's redis-py client (RedisCluster)
    "python3-redis",
    // the TLS tests' encrypted key file and the TLS benchmark's certificates
    "openssl",
];

/// Packages of `wanted` that `dpkg-query` output does not list as installed.
/// `dpkg_output` has lines `<package> <status>` (status `installed` when present).
pub fn missing_from(dpkg_output: &str, wanted: &[&str]) -> Vec<String> {
    wanted
        .iter()
        .filter(|p| {
            !dpkg_output.lines().any(|l| {
                let mut w = l.split_whitespace();
                let name = w.next().unwrap_or("");
                // multi-arch packages are listed as name:arch
                let base = name.split(':').next().unwrap_or("");
                base == **p && w.next() == Some("installed")
            })
        })
        .map(|p| p.to_string())
        .collect()
}

fn query_missing() -> Option<Vec<String>> {
    // Exit status 1 just means some package is unknown; the output still lists the rest.
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Package} ${db:Status-Status}\\n"])
        .args(PACKAGES)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    Some(missing_from(
        &String::from_utf8_lossy(&out.stdout),
        PACKAGES,
    ))
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

pub fn setup() -> Result<()> {
    let Some(missing) = query_missing() else {
        eprintln!(
            "xtask setup: dpkg-query not found (not Debian?): cannot check packages; make sure \
             equivalents of these are installed: {}",
            PACKAGES.join(" ")
        );
        return Ok(());
    };
    if missing.is_empty() {
        eprintln!(
            "xtask setup: all {} required packages are installed",
            PACKAGES.len()
        );
        return Ok(());
    }
    eprintln!(
        "xtask setup: missing Debian packages: {}",
        missing.join(" ")
    );
    let install = format!(
        "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y {}",
        missing.join(" ")
    );
    if !is_root() {
        return Err(format!(
            "not root, so not installing them; run:\n  sudo sh -c '{install}'\nthen run this \
             command again"
        ));
    }
    eprintln!("xtask setup: installing them (apt-get update + install)");
    cmd::run(Command::new("apt-get").arg("update"))?;
    cmd::run(
        Command::new("apt-get")
            .args(["install", "-y"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    match query_missing() {
        Some(still) if !still.is_empty() => Err(format!(
            "still missing after apt-get install: {}",
            still.join(" ")
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_packages_not_installed_or_absent() {
        let out = "clang installed\nbc not-installed\nlibibverbs-dev:amd64 installed\n";
        assert_eq!(
            missing_from(out, &["clang", "bc", "libibverbs-dev", "cpio"]),
            ["bc", "cpio"]
        );
    }

    #[test]
    fn nothing_missing_when_all_installed() {
        assert!(missing_from("a installed\nb installed\n", &["a", "b"]).is_empty());
    }
}
