//! grpcio — gRPC's own Python implementation — against the greeter's gRPC listener
//! (tests/grpcio_client.py does the calling). The Python packages live in a venv that
//! `cargo xtask setup` makes (`xtask/grpc-requirements.txt`); without it this test fails and
//! says so.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The venv `cargo xtask setup` fills with grpcio and grpcio-tools.
fn python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.join("target/grpc-venv/bin/python")
}

#[test]
fn grpcio_calls_the_greeter() {
    let python = python();
    let ready = Command::new(&python)
        .args(["-c", "import grpc, grpc_tools"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ready,
        "{} cannot import grpc and grpc_tools: run `cargo xtask setup` (it makes that venv \
         and pip-installs xtask/grpc-requirements.txt)",
        python.display()
    );
    let g = common::start();
    let out = std::env::temp_dir().join(format!("corewire-grpcio-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(&python)
        .arg(here.join("tests/grpcio_client.py"))
        .arg(here.join("proto"))
        .arg(&out)
        .arg(g.grpc.to_string())
        .arg(g.metrics.to_string())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the grpcio client did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = std::fs::remove_dir_all(&out);
    assert!(status.success(), "grpcio_client.py failed: {status}");
}
