//! RLIMIT_MEMLOCK for real, in the soft-RoCE VM (run by `cargo xtask test`).
//! Root's CAP_IPC_LOCK lifts the limit on pinned memory, so the test runs itself again as an
//! unprivileged user (nobody, through `setpriv`) under `ulimit -l 1024` (1 MiB): the server's
//! pool grows a slab at a time until registering the next one fails; the connection that
//! needed it is refused with an error naming the limit, and the connections already open
//! carry on.

mod rdma_common;

use std::net::SocketAddr;
use std::process::Command;

use corewire::runtime::accept::Placement;
use corewire::transport::rdma::{self, RdmaEndpoint, ReceiveQueues};
use corewire::{Client, ClientError, ClientOptions, Server, Service};
use rdma_common::{polling, rdma_listen_addr, runtime, Echo};

/// Set in the unprivileged child that does the work.
const CHILD: &str = "COREWIRE_MEMLOCK_CHILD";
const LIMIT_KIB: u64 = 1024;
const TEST: &str = "rdma_memlock_limit_refuses_only_the_connection_that_needs_memory";

#[test]
fn rdma_memlock_limit_refuses_only_the_connection_that_needs_memory() {
    corewire_verbs::testing::require_device();
    if std::env::var_os(CHILD).is_some() {
        as_unprivileged_user();
        return;
    }
    let euid = effective_uid();
    assert_eq!(
        euid, 0,
        "this test drops to an unprivileged user: run it as root in the soft-RoCE VM \
         (cargo xtask test)"
    );
    // The VM's devtmpfs makes the RDMA devices root-only; a real host's udev rules usually
    // open them to everyone, and its device modes are not ours to change.
    let in_vm = std::env::var_os("COREWIRE_RXE_VM").is_some();
    let devices = std::fs::read_dir("/dev/infiniband").expect("/dev/infiniband");
    for dev in devices.filter(|_| in_vm) {
        let path = dev.unwrap().path();
        let ok = Command::new("chmod").arg("0666").arg(&path).status();
        assert!(ok.is_ok_and(|s| s.success()), "chmod {path:?}");
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--",
            "sh",
            "-c",
            &format!("ulimit -l {LIMIT_KIB} && exec \"$0\" --exact {TEST} --nocapture"),
        ])
        .arg(&exe)
        .env(CHILD, "1")
        .output()
        .expect("run setpriv");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the unprivileged run failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // It really ran the test (not an empty filter).
    assert!(
        stdout.contains("1 passed"),
        "the unprivileged run did not run the test:\n{stdout}\n{stderr}"
    );
    for line in stderr.lines().filter(|l| l.contains("connections opened")) {
        eprintln!("unprivileged run: {line}");
    }
}

/// The test proper, as nobody with 1 MiB of locked memory.
fn as_unprivileged_user() {
    assert_ne!(effective_uid(), 0, "still root");
    let limit = memlock_limit();
    assert_eq!(limit, Some(LIMIT_KIB * 1024), "ulimit -l did not apply");

    // The client's memory is registered at its first connection (one slab, 256 KiB) and
    // its connections receive into its shared queue, so it never needs more; the server
    // gives each connection receive buffers of its own and registers 64 KiB at a time, so
    // it runs into the limit first.
    let client_config = {
        let mut o = polling();
        o.chunk_size = 4096;
        o.slab_bytes = 256 << 10;
        o.pool_bytes = 256 << 10;
        o.receive = ReceiveQueues::Shared { buffers: 32 };
        o
    };
    let server_config = {
        let mut o = polling();
        o.window = 4;
        o.chunk_size = 4096;
        o.slab_bytes = 64 << 10;
        o.pool_bytes = 8 << 20;
        o.receive = ReceiveQueues::PerConnection;
        o
    };
    let srt = runtime(1, server_config);
    let addr: SocketAddr = rdma_listen_addr();
    let server = Server::builder()
        .service(|_| Echo)
        .build()
        .serve(
            &srt,
            RdmaEndpoint::bind(addr).placement(Placement::RoundRobin),
        )
        .expect("rdma listen");
    let crt = runtime(1, client_config);
    let (opened, refusal) = crt
        .run_on(0, move || async move {
            let mut clients = Vec::new();
            let mut refusal = None;
            // 1 MiB / (7 receive buffers of 4 KiB) is about 36: 200 is far past it.
            for _ in 0..200 {
                match Client::connect_rdma(addr, ClientOptions::default()).await {
                    Ok(c) => {
                        c.call(Echo::ID, 0, "hi".into()).await.expect("call");
                        clients.push(c);
                    }
                    Err(e) => {
                        refusal = Some(e);
                        break;
                    }
                }
            }
            // The connections already open carry on.
            for c in &clients {
                c.call(Echo::ID, 0, "still here".into())
                    .await
                    .expect("an open connection failed after the refusal");
            }
            (clients.len(), refusal)
        })
        .unwrap();
    let refusal = refusal.expect("no connection was refused: the limit never bit");
    let why = match &refusal {
        ClientError::Disconnected(why) => why.to_string(),
        other => panic!("unexpected error {other:?}"),
    };
    assert!(
        why.contains("RLIMIT_MEMLOCK is 1048576 bytes"),
        "the error does not name the limit: {why}"
    );
    assert!(opened > 0, "not even one connection fitted: {why}");
    let st = rdma::stats(&srt);
    assert!(st[0].connections_refused >= 1, "{:?}", st[0]);
    assert!(
        st[0].pool_registered_bytes <= LIMIT_KIB * 1024,
        "{:?}",
        st[0]
    );
    eprintln!("{opened} connections opened, then: {why}");
    server.stop();
}

/// The soft RLIMIT_MEMLOCK in bytes (`None`: unlimited), from /proc/self/limits.
fn memlock_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").expect("/proc/self/limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max locked memory"))
        .expect("no locked-memory line");
    let soft = line["Max locked memory".len()..]
        .split_whitespace()
        .next()
        .expect("no soft limit");
    soft.parse().ok()
}

/// This process's effective user id (the owner of /proc/self).
fn effective_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").expect("/proc/self").uid()
}
