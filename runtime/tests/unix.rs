//! Unix-domain sockets on the ring: a stream echo through a listener, datagrams with
//! truncation reported, a path that exists refused, nothing listening refused, and pairs.

use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use corewire_runtime::net::{UnixAddr, UnixDatagram, UnixListener, UnixStream};
use corewire_runtime::{sleep, spawn_local, timeout};

const WAIT: Duration = Duration::from_secs(10);

/// A fresh directory for this test's socket files, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("corewire-unix-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[corewire_runtime::test]
async fn stream_echo_through_a_listener() {
    let dir = TempDir::new("stream");
    let path = dir.0.join("echo.sock");
    let listener = UnixListener::bind(&path).unwrap();
    assert_eq!(
        listener.local_addr().unwrap().as_pathname(),
        Some(path.as_path())
    );
    let server = spawn_local(async move {
        let conn = listener.accept().await.unwrap();
        let mut echoed = 0;
        loop {
            let (n, b) = conn.recv(BytesMut::new(), 4096).await;
            if n.unwrap() == 0 {
                return echoed;
            }
            echoed += b.len();
            conn.send_all(b.freeze()).await.unwrap();
        }
    });
    let client = UnixStream::connect(&path).await.unwrap();
    assert_eq!(
        client.peer_addr().unwrap(),
        UnixAddr::Pathname(path.clone())
    );
    assert!(client.local_addr().unwrap().is_unnamed());
    let message = Bytes::from(vec![b'u'; 100_000]);
    client.send_all(message.clone()).await.unwrap();
    let mut got = BytesMut::new();
    while got.len() < message.len() {
        let (n, b) = timeout(WAIT, client.recv(got, 64 * 1024)).await.unwrap();
        assert!(n.unwrap() > 0, "early EOF");
        got = b;
    }
    assert_eq!(got.freeze(), message);
    client.shutdown_write().unwrap();
    assert_eq!(server.await.unwrap(), message.len());
}

#[corewire_runtime::test]
async fn binding_a_path_that_exists_is_refused() {
    let dir = TempDir::new("exists");
    let path = dir.0.join("taken.sock");
    let first = UnixListener::bind(&path).unwrap();
    let err = UnixListener::bind(&path)
        .err()
        .expect("second bind refused");
    assert_eq!(err.kind(), ErrorKind::AddrInUse);
    // A plain file at the path: refused too, and never replaced.
    let file = dir.0.join("plain-file");
    std::fs::write(&file, b"not a socket").unwrap();
    let err = UnixDatagram::bind(&file).err().expect("refused");
    assert_eq!(err.kind(), ErrorKind::AddrInUse);
    assert_eq!(std::fs::read(&file).unwrap(), b"not a socket");
    // The first listener still works.
    let _client = UnixStream::connect(&path).await.unwrap();
    timeout(WAIT, first.accept()).await.unwrap().unwrap();
}

#[corewire_runtime::test]
async fn connecting_to_nothing_is_an_error_value() {
    let dir = TempDir::new("refused");
    let missing = dir.0.join("nobody-here.sock");
    let err = UnixStream::connect(&missing)
        .await
        .err()
        .expect("no listener");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    // A socket file whose listener is gone: refused.
    let path = dir.0.join("gone.sock");
    UnixListener::bind(&path).unwrap().close().await.unwrap();
    let err = UnixStream::connect(&path)
        .await
        .err()
        .expect("listener closed");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
    let err = UnixDatagram::unbound()
        .unwrap()
        .connect(&missing)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[corewire_runtime::test]
async fn datagrams_keep_boundaries_and_report_truncation() {
    let dir = TempDir::new("dgram");
    let (a_path, b_path) = (dir.0.join("a.sock"), dir.0.join("b.sock"));
    let a = UnixDatagram::bind(&a_path).unwrap();
    let b = UnixDatagram::bind(&b_path).unwrap();
    a.send_to(Bytes::from_static(b"short"), &b_path)
        .unwrap()
        .await
        .0
        .unwrap();
    a.send_to(Bytes::from(vec![7u8; 5000]), &b_path)
        .unwrap()
        .await
        .0
        .unwrap();
    let (got, buf) = b.recv_from(BytesMut::with_capacity(1024), 1024).await;
    let got = got.unwrap();
    assert_eq!((&buf[..], got.truncated), (&b"short"[..], false));
    assert_eq!(got.from, UnixAddr::Pathname(a_path.clone()));
    let (got, buf) = b.recv_from(BytesMut::with_capacity(1024), 1024).await;
    let got = got.unwrap();
    assert!(got.truncated, "5000 bytes into {}", buf.capacity());
    assert!(buf.capacity() < 5000);
    assert_eq!(got.len, buf.len());
    // Connected and unbound: the receiver sees an unnamed sender.
    let c = UnixDatagram::unbound().unwrap();
    c.connect(&b_path).unwrap();
    assert_eq!(c.peer_addr().unwrap(), UnixAddr::Pathname(b_path.clone()));
    c.send(Bytes::from_static(b"from nowhere")).await.0.unwrap();
    let (got, buf) = b.recv_from(BytesMut::new(), 64).await;
    assert_eq!(&buf[..], b"from nowhere");
    assert!(got.unwrap().from.is_unnamed());
}

#[corewire_runtime::test]
async fn pairs_talk() {
    let (x, y) = UnixStream::pair().unwrap();
    x.send_all(Bytes::from_static(b"hi")).await.unwrap();
    let (n, buf) = y.recv(BytesMut::new(), 16).await;
    assert_eq!((n.unwrap(), &buf[..]), (2, &b"hi"[..]));
    let (p, q) = UnixDatagram::pair().unwrap();
    p.send(Bytes::from_static(b"one")).await.0.unwrap();
    p.send(Bytes::from_static(b"two")).await.0.unwrap();
    for want in [&b"one"[..], b"two"] {
        let (got, buf) = q.recv_from(BytesMut::new(), 16).await;
        assert_eq!((got.unwrap().len, &buf[..]), (3, want));
    }
}

#[corewire_runtime::test]
async fn a_stream_dropped_with_a_receive_in_flight_closes_once_it_completes() {
    let (x, y) = UnixStream::pair().unwrap();
    let recv = x.recv(BytesMut::new(), 16);
    let pending = spawn_local(recv);
    sleep(Duration::from_millis(10)).await;
    // The receive keeps the socket open: the peer can still reach it.
    drop(x);
    y.send_all(Bytes::from_static(b"still there"))
        .await
        .unwrap();
    let (n, buf) = timeout(WAIT, pending).await.unwrap().unwrap();
    assert_eq!((n.unwrap(), &buf[..]), (11, &b"still there"[..]));
    // The last holder is gone: the peer reads end-of-stream.
    let (n, _) = timeout(WAIT, y.recv(BytesMut::new(), 16)).await.unwrap();
    assert_eq!(n.unwrap(), 0);
}
