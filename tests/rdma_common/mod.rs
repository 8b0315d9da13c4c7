//! Shared by the `rdma_*` test binaries (they run inside the soft-RoCE VM): an echo service,
//! listen addresses that do not collide between binaries, and a runtime serving the echo
//! service over RDMA.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use corewire::runtime::accept::Placement;
use corewire::transport::rdma::{self, RdmaConfig, RdmaEndpoint};
use corewire::{
    service_id, sleep, ListenerHandle, Request, Response, Runtime, Server, Service, Status,
};
use corewire_verbs::{
    CmEventChannel, CmEventKind, CmId, CompletionQueue, ConnParams, Context, ProtectionDomain,
    QpCaps, QpInit, QueuePair,
};

pub struct Echo;
impl Service for Echo {
    const ID: u32 = service_id("echo");
    async fn call(&self, req: Request) -> Result<Response, Status> {
        if req.method == 1 {
            // A slow handler: replies lag behind requests.
            sleep(Duration::from_millis(2)).await;
        }
        Ok(Response::new(req.payload).with_attachment(req.attachment))
    }
}

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

/// A fresh listen address on the VM's rxe0 (test binaries run one after another, each from
/// its own port range by pid).
pub fn rdma_listen_addr() -> SocketAddr {
    let base = 20_000 + (std::process::id() % 1000) as u16 * 20;
    let port = base + NEXT_PORT.fetch_add(1, Ordering::Relaxed) % 20;
    SocketAddr::new(corewire_verbs::testing::rdma_addr(), port)
}

pub struct Setup {
    pub rt: Runtime,
    pub addr: SocketAddr,
    pub server: Option<ListenerHandle>,
    pub tcp: Option<ListenerHandle>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}

/// A runtime of `shards` shards with the RDMA transport installed, serving [`Echo`].
pub fn setup(shards: usize, config: RdmaConfig) -> Setup {
    corewire_verbs::testing::require_device();
    let rt = runtime(shards, config);
    let addr = rdma_listen_addr();
    let server = Server::builder()
        .service(|_| Echo)
        .build()
        .serve(
            &rt,
            RdmaEndpoint::bind(addr).placement(Placement::LeastConnections),
        )
        .expect("rdma listen");
    Setup {
        rt,
        addr,
        server: Some(server),
        tcp: None,
    }
}

/// A runtime with the RDMA transport installed and nothing served (a client, say).
pub fn runtime(shards: usize, config: RdmaConfig) -> Runtime {
    corewire_verbs::testing::require_device();
    let rt = Runtime::builder()
        .shards(shards)
        .pin(false)
        .build()
        .unwrap();
    rdma::install(&rt, config).expect("install the RDMA transport");
    rt
}

pub fn polling() -> RdmaConfig {
    RdmaConfig::default()
}

/// The reason in a corewire server's rejection private data: `CWRJ`, the reason, a NUL (the
/// transport's wire format, kept private to it; `None` for anything else).
pub fn decode_reject(bytes: &[u8]) -> Option<String> {
    let text = bytes.strip_prefix(b"CWRJ")?;
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    Some(String::from_utf8_lossy(&text[..end]).into_owned())
}

/// Connect to `addr` with raw verbs, offering `private_data` as the handshake (a peer that is
/// not, or not quite, corewire): the event that ended the attempt and its private data.
pub fn raw_connect(addr: SocketAddr, private_data: &[u8]) -> (CmEventKind, Vec<u8>) {
    let ch = CmEventChannel::new().unwrap();
    let next = || {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(ev) = ch.get_event().unwrap() {
                return ev;
            }
            assert!(std::time::Instant::now() < deadline, "no rdma_cm event");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let id = CmId::new(&ch).unwrap();
    id.resolve_addr(None, addr, Duration::from_secs(5)).unwrap();
    assert_eq!(next().kind(), CmEventKind::AddrResolved);
    id.resolve_route(Duration::from_secs(5)).unwrap();
    assert_eq!(next().kind(), CmEventKind::RouteResolved);
    let ctx = Context::from_cm_id(&id).unwrap();
    let pd = ProtectionDomain::new(&ctx).unwrap();
    let cq = CompletionQueue::new(&ctx, 16, None).unwrap();
    let qp = QueuePair::create(
        id,
        &pd,
        QpInit {
            send_cq: &cq,
            recv_cq: &cq,
            srq: None,
            caps: QpCaps::default(),
            sq_sig_all: false,
        },
    )
    .unwrap();
    let params = {
        let mut o = ConnParams::default();
        o.private_data = private_data;
        o
    };
    qp.cm_id().connect(&params).unwrap();
    let ev = next();
    (ev.kind(), ev.private_data().to_vec())
}
