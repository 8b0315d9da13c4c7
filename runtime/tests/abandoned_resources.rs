//! Operations whose result is a resource (a new descriptor) release it when the future that
//! asked for it is gone: the kernel may complete an accept or an open after (or just before)
//! its future is dropped, and nobody else would ever close what it produced.

mod common;

use std::future::{poll_fn, Future};
use std::io::Read;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::Poll;
use std::time::Duration;

use corewire_runtime::fs::File;
use corewire_runtime::net::{ListenOptions, TcpListener};
use corewire_runtime::sleep;

use common::process::{fd_targets, wait_until};

/// Poll `fut` exactly once (so its SQE is submitted at the end of this loop iteration).
async fn poll_once<F: Future>(fut: &mut Pin<Box<F>>) {
    poll_fn(|cx| {
        assert!(fut.as_mut().poll(cx).is_pending(), "completed too early");
        Poll::Ready(())
    })
    .await
}

/// The review's shape: an accept completes and is reaped while nobody polls its future; the
/// future is then dropped. With a single-shot accept, the accepted socket must be closed (the
/// client reads end-of-stream), not leaked (the client would wait forever) nor reset with the
/// listener's backlog. With multishot accept, the connection stays queued for the listener
/// and the next accept gets it (accept is then cancel-safe); on epoll it stays in the listen
/// backlog (an accept takes it only in the poll that returns it) and the next accept gets it
/// too. Closing it ends the client's read the same way.
#[test]
fn accepted_socket_of_a_dropped_accept_is_closed() {
    let rt = common::runtime(1);
    let multishot =
        rt.features().accept_multishot || rt.backend() == corewire_runtime::Backend::Epoll;
    let (addr_tx, addr_rx) = mpsc::channel();
    let (connected_tx, connected_rx) = mpsc::channel::<()>();
    let connected_rx = std::sync::Mutex::new(connected_rx);
    let (dropped_tx, dropped_rx) = mpsc::channel();
    let _task = rt.spawn_on(0, move || async move {
        let listener =
            TcpListener::bind("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let mut accept = Box::pin(listener.accept());
        poll_once(&mut accept).await;
        addr_tx.send(listener.local_addr()).unwrap();
        // Wait, without polling the accept, until the client connected, and then long enough
        // for the completion to be reaped into the op's slot.
        while connected_rx.lock().unwrap().try_recv().is_err() {
            sleep(Duration::from_millis(5)).await;
        }
        sleep(Duration::from_millis(50)).await;
        drop(accept);
        if multishot {
            let next = corewire_runtime::timeout(Duration::from_secs(5), listener.accept()).await;
            let (stream, _) = next
                .expect("the connection of the dropped accept was lost")
                .expect("accept");
            drop(stream);
        }
        dropped_tx.send(()).unwrap();
        // Keep the listener open: only the accepted socket is under test.
        sleep(Duration::from_secs(10)).await;
        drop(listener);
    });
    let addr = addr_rx.recv().unwrap();
    let mut client = std::net::TcpStream::connect(addr).unwrap();
    connected_tx.send(()).unwrap();
    dropped_rx.recv().unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut byte = [0u8; 1];
    let got = client.read(&mut byte);
    assert!(
        matches!(got, Ok(0)),
        "the accepted socket was never closed: {got:?}"
    );
}

/// The same for a file opened through the ring: an open that completed for a dropped future
/// leaves no descriptor behind.
#[test]
fn file_of_a_dropped_open_is_closed() {
    let dir = std::env::temp_dir().join(format!("corewire-open-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("abandoned-open");
    std::fs::write(&path, b"x").unwrap();
    let shown = path.display().to_string();
    let rt = common::runtime(1);
    let p = path.clone();
    rt.run_on(0, move || async move {
        let mut open = Box::pin(File::open(p));
        poll_once(&mut open).await;
        sleep(Duration::from_millis(50)).await;
        drop(open);
    })
    .unwrap();
    let closed = wait_until(Duration::from_secs(30), || !fd_targets().contains(&shown));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(closed, "{shown} is still open: {:?}", fd_targets());
}
