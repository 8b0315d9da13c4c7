//! RDMA tests for the safe verbs layer. They need a device, so they run inside the
//! soft-RoCE VM: `cargo xtask test` runs this binary there (its name starts with `rdma`).
//! Client and server are in one process on rxe0 (10.77.0.1), each in its own thread, as two
//! shards would be; every test uses its own port so they can run in parallel.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use corewire_verbs::testing::{rdma_addr, require_device, VM_RXE_ADDR};
use corewire_verbs::{
    Access, CmEvent, CmEventChannel, CmEventKind, CmId, CompletionChannel, CompletionQueue,
    ConnParams, Context, MemoryRegion, PortState, ProtectionDomain, QpCaps, QpInit, QueuePair,
    SendOp, SendWr, SharedReceiveQueue, VerbsError, WcOpcode, WcStatus, WorkCompletion, MAX_SGE,
};

/// Generous: everything runs under qemu TCG.
const TIMEOUT: Duration = Duration::from_secs(30);
const BUF: usize = 64 * 1024;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::new(rdma_addr(), port)
}

/// Waits until `fd` is readable (panics at the deadline).
fn wait_readable(fd: RawFd, deadline: Instant, what: &str) {
    let left = deadline.saturating_duration_since(Instant::now());
    assert!(!left.is_zero(), "timed out waiting for {what}");
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
    // SAFETY: pfd is one valid pollfd on our stack; poll only writes its revents.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    assert!(rc >= 0, "poll: {}", std::io::Error::last_os_error());
}

fn next_event(ch: &CmEventChannel) -> CmEvent {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(ev) = ch.get_event().expect("rdma_get_cm_event") {
            return ev;
        }
        wait_readable(ch.as_raw_fd(), deadline, "an rdma_cm event");
    }
}

fn expect_event(ch: &CmEventChannel, kind: CmEventKind) -> CmEvent {
    let ev = next_event(ch);
    assert_eq!(ev.kind(), kind, "unexpected event (status {})", ev.status());
    ev
}

/// Busy-polls `cq` until `n` completions arrived.
fn poll_n(cq: &CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let deadline = Instant::now() + TIMEOUT;
    let mut out = Vec::new();
    let mut wcs = [WorkCompletion::default(); 8];
    while out.len() < n {
        let got = cq.poll(&mut wcs).expect("ibv_poll_cq");
        out.extend_from_slice(&wcs[..got]);
        assert!(
            Instant::now() < deadline,
            "timed out with {} of {n} completions: {out:?}",
            out.len()
        );
        if got == 0 {
            thread::yield_now();
        }
    }
    out
}

/// One side's verbs resources: PD, a CQ with a completion channel, one buffer.
struct Endpoint {
    pd: ProtectionDomain,
    comp: CompletionChannel,
    cq: CompletionQueue,
    mr: MemoryRegion,
}

impl Endpoint {
    fn new(ctx: &Context) -> Self {
        let pd = ProtectionDomain::new(ctx).expect("ibv_alloc_pd");
        let comp = CompletionChannel::new(ctx).expect("ibv_create_comp_channel");
        let cq = CompletionQueue::new(ctx, 64, Some(&comp)).expect("ibv_create_cq");
        let mr = MemoryRegion::new(&pd, BUF, Access::LOCAL_WRITE).expect("ibv_reg_mr");
        Endpoint { pd, comp, cq, mr }
    }

    fn qp_init<'a>(&'a self, srq: Option<&'a SharedReceiveQueue>) -> QpInit<'a> {
        QpInit {
            send_cq: &self.cq,
            recv_cq: &self.cq,
            srq,
            caps: {
                let mut o = QpCaps::default();
                o.max_send_sge = 2;
                o.max_inline_data = 64;
                o
            },
            sq_sig_all: false,
        }
    }

    /// Posts `n` receives of 1 KiB each at offset i KiB, wr_id = first_wr_id + i.
    fn post_recvs(&self, qp: &QueuePair, first_wr_id: u64, n: usize) {
        for i in 0..n {
            let sge = self.mr.sge(i * 1024, 1024).unwrap();
            qp.post_recv(first_wr_id + i as u64, &[sge])
                .expect("ibv_post_recv");
        }
    }
}

fn listen(ch: &CmEventChannel, port: u16) -> CmId {
    let id = CmId::new(ch).expect("rdma_create_id");
    id.bind_addr(addr(port)).expect("rdma_bind_addr");
    id.listen(8).expect("rdma_listen");
    id
}

/// Takes the next connect request on `ch`, creates its QP on `ep` (which must be on the
/// request's device), lets `before_accept` post receives, accepts and waits for ESTABLISHED.
fn accept(
    ch: &CmEventChannel,
    id: CmId,
    ep: &Endpoint,
    srq: Option<&SharedReceiveQueue>,
    before_accept: impl FnOnce(&QueuePair),
) -> QueuePair {
    let qp = QueuePair::create(id, &ep.pd, ep.qp_init(srq)).expect("rdma_create_qp");
    before_accept(&qp);
    qp.cm_id()
        .accept(&ConnParams::default())
        .expect("rdma_accept");
    expect_event(ch, CmEventKind::Established);
    qp
}

fn take_request(ch: &CmEventChannel) -> CmId {
    let mut ev = expect_event(ch, CmEventKind::ConnectRequest);
    ev.take_conn_request()
        .expect("connect request carries an id")
}

/// Connects to `port`, retrying while the server is not up yet (servers start slowly under
/// emulation). `before_connect` posts receives on the new QP.
fn connect(
    ch: &CmEventChannel,
    ep: &Endpoint,
    port: u16,
    private_data: &[u8],
    before_connect: impl Fn(&QueuePair),
) -> QueuePair {
    let mut last = None;
    for attempt in 0..20 {
        if attempt > 0 {
            thread::sleep(Duration::from_millis(250));
        }
        let id = CmId::new(ch).expect("rdma_create_id");
        id.resolve_addr(None, addr(port), Duration::from_secs(5))
            .expect("rdma_resolve_addr");
        let ev = next_event(ch);
        if ev.kind() != CmEventKind::AddrResolved {
            last = Some((ev.kind(), ev.status()));
            continue;
        }
        id.resolve_route(Duration::from_secs(5))
            .expect("rdma_resolve_route");
        let ev = next_event(ch);
        if ev.kind() != CmEventKind::RouteResolved {
            last = Some((ev.kind(), ev.status()));
            continue;
        }
        let qp = QueuePair::create(id, &ep.pd, ep.qp_init(None)).expect("rdma_create_qp");
        before_connect(&qp);
        let params = {
            let mut o = ConnParams::default();
            o.private_data = private_data;
            o
        };
        qp.cm_id().connect(&params).expect("rdma_connect");
        let ev = next_event(ch);
        match ev.kind() {
            CmEventKind::Established => return qp,
            kind if kind.is_connect_failure() => last = Some((kind, ev.status())),
            kind => panic!("unexpected event {kind:?} while connecting"),
        }
    }
    panic!("could not connect to port {port}: last event {last:?}");
}

/// Starts a server thread; returns once it listens.
fn spawn_server<T: Send + 'static>(
    port: u16,
    body: impl FnOnce(CmEventChannel, CmId) -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        let ch = CmEventChannel::new().expect("rdma_create_event_channel");
        let listener = listen(&ch, port);
        ready_tx.send(()).unwrap();
        body(ch, listener)
    });
    ready_rx
        .recv_timeout(TIMEOUT)
        .expect("server thread did not start listening");
    handle
}

fn client_endpoint() -> (CmEventChannel, Endpoint) {
    let ch = CmEventChannel::new().expect("rdma_create_event_channel");
    let ctx = Context::from_rdma_cm(None).expect("rdma_get_devices");
    (ch, Endpoint::new(&ctx))
}

#[test]
fn rdma_device_pd_mr_and_cq_with_channel() {
    let ctx = require_device();
    let port = ctx.query_port(1).expect("ibv_query_port");
    assert_eq!(port.state, PortState::Active);
    assert!(port.is_ethernet, "rxe is RoCE");
    if rdma_addr() == VM_RXE_ADDR {
        // GID 1 is the RoCE v2 GID of the netdev's IPv4 address (::ffff:10.77.0.1).
        let gid = ctx.query_gid(1, 1).expect("ibv_query_gid");
        assert_eq!(&gid[10..], &[0xff, 0xff, 10, 77, 0, 1]);
    }

    let pd = ProtectionDomain::new(&ctx).unwrap();
    let mut mr = MemoryRegion::new(&pd, BUF, Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
    assert_eq!(mr.len(), BUF);
    assert_eq!(mr.addr() % 4096, 0, "page-aligned allocation");
    assert!(mr.as_slice().iter().all(|&b| b == 0));
    mr.as_mut_slice()[..5].copy_from_slice(b"hello");
    assert_eq!(&mr.as_slice()[..5], b"hello");
    mr.write_at(10, b"xyz").unwrap();
    let mut out = [0u8; 3];
    mr.read_into(10, &mut out).unwrap();
    assert_eq!(&out, b"xyz");
    assert_eq!(mr.read_at(10, 3).unwrap(), b"xyz");
    assert!(mr.write_at(BUF - 1, b"ab").is_err());
    assert!(mr.read_into(BUF, &mut out).is_err());
    assert!(mr.sge(BUF - 16, 16).is_ok());
    assert_eq!(
        mr.sge(BUF - 16, 17).unwrap_err(),
        VerbsError::InvalidRange {
            offset: BUF - 16,
            len: 17,
            region_len: BUF
        }
    );

    let boxed =
        MemoryRegion::from_boxed(&pd, vec![7u8; 100].into_boxed_slice(), Access::LOCAL_READ)
            .unwrap();
    assert_eq!(boxed.as_slice(), &[7u8; 100][..]);
    assert_ne!(boxed.lkey(), mr.lkey());

    let comp = CompletionChannel::new(&ctx).unwrap();
    let cq = CompletionQueue::new(&ctx, 128, Some(&comp)).unwrap();
    assert!(cq.capacity() >= 128);
    cq.req_notify(false).unwrap();
    assert_eq!(comp.get_cq_event().unwrap(), None, "no completion yet");
    let mut wcs = [WorkCompletion::default(); 4];
    assert_eq!(cq.poll(&mut wcs).unwrap(), 0);
    // Children hold their parents: dropping the handles in "wrong" order is fine.
    drop(pd);
    drop(comp);
    drop(ctx);
    drop(mr);
    drop(cq);
}

#[test]
fn rdma_send_recv_over_rdma_cm() {
    require_device();
    const PORT: u16 = 20101;
    let server = spawn_server(PORT, |ch, _listener| {
        let mut ev = expect_event(&ch, CmEventKind::ConnectRequest);
        let hello = ev.private_data()[..5].to_vec();
        let id = ev.take_conn_request().unwrap();
        let peer = id.peer_addr();
        let ep = Endpoint::new(&Context::from_cm_id(&id).unwrap());
        let qp = accept(&ch, id, &ep, None, |qp| ep.post_recvs(qp, 100, 2));
        let wcs = poll_n(&ep.cq, 2);
        let data: Vec<Vec<u8>> = wcs
            .iter()
            .map(|wc| {
                let off = (wc.wr_id - 100) as usize * 1024;
                ep.mr.as_slice()[off..off + wc.byte_len as usize].to_vec()
            })
            .collect();
        (hello, peer, qp.cm_id().local_addr(), wcs, data)
    });

    let (ch, mut ep) = client_endpoint();
    let qp = connect(&ch, &ep, PORT, b"hello", |_| {});
    assert_eq!(qp.cm_id().peer_addr(), Some(addr(PORT)));
    ep.mr.as_mut_slice()[..14].copy_from_slice(b"hello corewire");
    ep.mr.as_mut_slice()[100..106].copy_from_slice(b"second");
    let first = [ep.mr.sge(0, 6).unwrap(), ep.mr.sge(6, 8).unwrap()];
    qp.post_send(&SendWr::send(1, &first)).unwrap();
    let second = [ep.mr.sge(100, 6).unwrap()];
    qp.post_send(&SendWr {
        op: SendOp::SendWithImm(0xC0FF_EE00),
        ..SendWr::send(2, &second)
    })
    .unwrap();
    let sent = poll_n(&ep.cq, 2);
    assert!(sent
        .iter()
        .all(|wc| wc.status == WcStatus::Success && wc.opcode == WcOpcode::Send));
    assert_eq!(sent.iter().map(|wc| wc.wr_id).collect::<Vec<_>>(), [1, 2]);

    let (hello, peer, server_local, wcs, data) = server.join().unwrap();
    assert_eq!(hello, b"hello");
    assert_eq!(peer, qp.cm_id().local_addr());
    assert_eq!(server_local, Some(addr(PORT)));
    assert_eq!(wcs[0].status, WcStatus::Success);
    assert_eq!(wcs[0].opcode, WcOpcode::Recv);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].byte_len, wcs[0].imm_data),
        (100, 14, None)
    );
    assert_eq!(data[0], b"hello corewire");
    assert_eq!((wcs[1].wr_id, wcs[1].byte_len), (101, 6));
    assert_eq!(wcs[1].imm_data, Some(0xC0FF_EE00));
    assert_eq!(data[1], b"second");
}

#[test]
fn rdma_event_mode_completion() {
    require_device();
    const PORT: u16 = 20102;
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let server = spawn_server(PORT, move |ch, _listener| {
        let id = take_request(&ch);
        let ep = Endpoint::new(&Context::from_cm_id(&id).unwrap());
        let qp = accept(&ch, id, &ep, None, |qp| ep.post_recvs(qp, 0, 4));
        // Arm, then let the client send; the channel fd must become readable.
        ep.cq.req_notify(false).unwrap();
        assert_eq!(ep.comp.get_cq_event().unwrap(), None);
        go_tx.send(()).unwrap();
        let deadline = Instant::now() + TIMEOUT;
        let key = loop {
            if let Some(key) = ep.comp.get_cq_event().unwrap() {
                break key;
            }
            wait_readable(ep.comp.as_raw_fd(), deadline, "a completion event");
        };
        assert_eq!(key, ep.cq.key());
        // Re-arm before polling, so a completion racing with the poll raises a new event.
        ep.cq.req_notify(false).unwrap();
        let wcs = poll_n(&ep.cq, 1);
        let text = ep.mr.as_slice()[..wcs[0].byte_len as usize].to_vec();
        ep.cq.ack_events();
        drop(qp);
        (wcs[0], text)
    });

    let (ch, mut ep) = client_endpoint();
    let qp = connect(&ch, &ep, PORT, &[], |_| {});
    go_rx.recv_timeout(TIMEOUT).unwrap();
    ep.mr.as_mut_slice()[..5].copy_from_slice(b"event");
    let sge = [ep.mr.sge(0, 5).unwrap()];
    qp.post_send(&SendWr {
        inline: true,
        ..SendWr::send(9, &sge)
    })
    .unwrap();
    let sent = poll_n(&ep.cq, 1);
    assert_eq!(sent[0].status, WcStatus::Success);

    let (wc, text) = server.join().unwrap();
    assert_eq!(
        (wc.status, wc.opcode, wc.wr_id),
        (WcStatus::Success, WcOpcode::Recv, 0)
    );
    assert_eq!(text, b"event");
}

#[test]
fn rdma_flushed_work_completions() {
    require_device();
    const PORT: u16 = 20103;
    let (result_tx, result_rx) = mpsc::channel();
    let server = spawn_server(PORT, move |ch, _listener| {
        let id = take_request(&ch);
        let ep = Endpoint::new(&Context::from_cm_id(&id).unwrap());
        let qp = accept(&ch, id, &ep, None, |qp| ep.post_recvs(qp, 10, 4));
        let first = poll_n(&ep.cq, 1);
        // Disconnect moves our QP to the error state: the 3 unused receives flush.
        qp.cm_id().disconnect().unwrap();
        let flushed = poll_n(&ep.cq, 3);
        result_tx.send((first[0], flushed)).unwrap();
        // The active side's DISCONNECTED comes once the peer disconnects too (DREP).
        expect_event(&ch, CmEventKind::Disconnected);
    });

    let (ch, ep) = client_endpoint();
    let qp = connect(&ch, &ep, PORT, &[], |qp| ep.post_recvs(qp, 50, 2));
    let sge = [ep.mr.sge(4096, 32).unwrap()];
    qp.post_send(&SendWr::send(1, &sge)).unwrap();
    assert_eq!(poll_n(&ep.cq, 1)[0].status, WcStatus::Success);

    let (first, flushed) = result_rx.recv_timeout(TIMEOUT).unwrap();
    assert_eq!(
        (first.status, first.wr_id, first.byte_len),
        (WcStatus::Success, 10, 32)
    );
    assert!(
        flushed.iter().all(|wc| wc.status == WcStatus::WrFlushError),
        "{flushed:?}"
    );
    let mut ids: Vec<u64> = flushed.iter().map(|wc| wc.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [11, 12, 13]);

    // The client sees the disconnect; forcing its QP to error flushes its own receives.
    expect_event(&ch, CmEventKind::Disconnected);
    qp.set_error().unwrap();
    let flushed = poll_n(&ep.cq, 2);
    assert!(
        flushed
            .iter()
            .all(|wc| wc.status == WcStatus::WrFlushError && wc.opcode == WcOpcode::Unspecified),
        "{flushed:?}"
    );
    let mut ids: Vec<u64> = flushed.iter().map(|wc| wc.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [50, 51]);
    qp.cm_id().disconnect().unwrap();
    server.join().unwrap();
}

#[test]
fn rdma_migrate_accepted_id_to_another_shard() {
    require_device();
    const PORT: u16 = 20104;
    let (handoff_tx, handoff_rx) = mpsc::channel::<CmId>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    // The listening shard only takes requests and hands the new ids over.
    let acceptor = spawn_server(PORT, move |ch, _listener| {
        let id = take_request(&ch);
        assert!(id.is_on(&ch));
        handoff_tx.send(id).unwrap();
        // Once the connection has come and gone, none of its events may have arrived here.
        done_rx.recv_timeout(TIMEOUT).unwrap();
        ch.get_event().unwrap().map(|ev| ev.kind())
    });
    // The owning shard moves the id to its own channel, then creates the QP and accepts.
    let owner = thread::spawn(move || {
        let ch = CmEventChannel::new().unwrap();
        let mut id = handoff_rx.recv_timeout(TIMEOUT).unwrap();
        id.migrate(&ch).expect("rdma_migrate_id");
        assert!(id.is_on(&ch));
        let ep = Endpoint::new(&Context::from_cm_id(&id).unwrap());
        let qp = accept(&ch, id, &ep, None, |qp| ep.post_recvs(qp, 0, 1));
        let wc = poll_n(&ep.cq, 1)[0];
        let text = ep.mr.as_slice()[..wc.byte_len as usize].to_vec();
        expect_event(&ch, CmEventKind::Disconnected);
        drop(qp);
        done_tx.send(()).unwrap();
        text
    });

    let (ch, mut ep) = client_endpoint();
    let qp = connect(&ch, &ep, PORT, &[], |_| {});
    ep.mr.as_mut_slice()[..8].copy_from_slice(b"migrated");
    let sge = [ep.mr.sge(0, 8).unwrap()];
    qp.post_send(&SendWr::send(1, &sge)).unwrap();
    assert_eq!(poll_n(&ep.cq, 1)[0].status, WcStatus::Success);
    qp.cm_id().disconnect().unwrap();
    assert_eq!(owner.join().unwrap(), b"migrated");
    assert_eq!(
        acceptor.join().unwrap(),
        None,
        "event leaked to the old channel"
    );
}

#[test]
fn rdma_shared_receive_queue() {
    require_device();
    const PORT: u16 = 20105;
    let server = spawn_server(PORT, |ch, _listener| {
        let id = take_request(&ch);
        let ep = Endpoint::new(&Context::from_cm_id(&id).unwrap());
        let srq = SharedReceiveQueue::new(&ep.pd, 16, 1).unwrap();
        for i in 0..2 {
            srq.post_recv(i, &[ep.mr.sge(i as usize * 1024, 1024).unwrap()])
                .unwrap();
        }
        let qp = accept(&ch, id, &ep, Some(&srq), |_| {});
        let own_recv = qp.post_recv(9, &[ep.mr.sge(0, 8).unwrap()]);
        let mut wcs = poll_n(&ep.cq, 2);
        wcs.sort_by_key(|wc| wc.wr_id);
        let texts: Vec<Vec<u8>> = wcs
            .iter()
            .map(|wc| {
                let off = wc.wr_id as usize * 1024;
                ep.mr.as_slice()[off..off + wc.byte_len as usize].to_vec()
            })
            .collect();
        (own_recv, texts)
    });

    let (ch, mut ep) = client_endpoint();
    let qp = connect(&ch, &ep, PORT, &[], |_| {});
    ep.mr.as_mut_slice()[..6].copy_from_slice(b"srq-1!");
    for i in 0..2u64 {
        let sge = [ep.mr.sge(i as usize * 3, 3).unwrap()];
        qp.post_send(&SendWr::send(i, &sge)).unwrap();
    }
    assert_eq!(poll_n(&ep.cq, 2).len(), 2);
    let (own_recv, texts) = server.join().unwrap();
    assert_eq!(own_recv, Err(VerbsError::UsesSrq));
    assert_eq!(texts, [b"srq".to_vec(), b"-1!".to_vec()]);
}

#[test]
fn rdma_safe_layer_rejects_bad_requests() {
    require_device();
    const PORT: u16 = 20106;
    let server = spawn_server(PORT, |ch, _listener| {
        let id = take_request(&ch);
        let ep = Endpoint::new(&Context::from_cm_id(&id).unwrap());
        let qp = accept(&ch, id, &ep, None, |_| {});
        expect_event(&ch, CmEventKind::Disconnected);
        drop(qp);
    });
    let (ch, ep) = client_endpoint();
    let qp = connect(&ch, &ep, PORT, &[], |_| {});
    // A region of another protection domain.
    let other_pd = ProtectionDomain::new(&ep.pd.context()).unwrap();
    let foreign = MemoryRegion::new(&other_pd, 4096, Access::LOCAL_WRITE).unwrap();
    let sge = [foreign.sge(0, 8).unwrap()];
    assert_eq!(
        qp.post_send(&SendWr::send(1, &sge)).unwrap_err(),
        VerbsError::ForeignProtectionDomain
    );
    // More entries than the QP was granted.
    let too_many = (qp.caps().max_send_sge as usize).min(MAX_SGE) + 1;
    let sges = vec![ep.mr.sge(0, 1).unwrap(); too_many];
    assert!(matches!(
        qp.post_send(&SendWr::send(1, &sges)),
        Err(VerbsError::TooManySges { given, .. }) if given == too_many
    ));
    // Inline larger than granted.
    let big = [ep
        .mr
        .sge(0, qp.caps().max_inline_data as usize + 1)
        .unwrap()];
    assert!(matches!(
        qp.post_send(&SendWr {
            inline: true,
            ..SendWr::send(1, &big)
        }),
        Err(VerbsError::InlineTooLarge { .. })
    ));
    // A QP on a PD from a separately opened context (not librdmacm's) is refused.
    let foreign_ctx = Context::open(None).unwrap();
    let foreign_pd = ProtectionDomain::new(&foreign_ctx).unwrap();
    let id = CmId::new(&ch).unwrap();
    id.bind_addr(addr(0)).unwrap();
    let err = QueuePair::create(id, &foreign_pd, ep.qp_init(None)).unwrap_err();
    assert_eq!(err.error, VerbsError::DeviceMismatch);
    qp.cm_id().disconnect().unwrap();
    server.join().unwrap();
}
