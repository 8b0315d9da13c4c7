//! A shard without an idle spin parks as soon as it runs out of work, and on epoll that
//! park's wait is also the pass's reap: each of these sources must still wake it — a timer,
//! a socket, another shard's message, a file operation (epoll: the blocking pool) and a
//! blocking call. Every step makes the shard wait a few milliseconds, so it sleeps first.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use corewire_runtime::fs::File;
use corewire_runtime::net::TcpStream;
use corewire_runtime::{shard_id, sleep, spawn_blocking, submit_to, Runtime};

const ROUNDS: u64 = 20;
const PAUSE: Duration = Duration::from_millis(2);

#[test]
fn a_shard_that_parks_at_once_wakes_for_every_source() {
    let rt = Runtime::builder()
        .shards(2)
        .pin(false)
        .spin_before_park(Duration::ZERO)
        .build()
        .unwrap();
    // A blocking peer that answers each message after a pause.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut b = [0u8; 8];
        for _ in 0..ROUNDS {
            s.read_exact(&mut b).unwrap();
            std::thread::sleep(PAUSE);
            s.write_all(&b).unwrap();
        }
    });
    let path = std::env::temp_dir().join(format!("corewire-park-{}", std::process::id()));
    let file_path = path.clone();
    rt.run_on(0, move || async move {
        for _ in 0..ROUNDS {
            let t = Instant::now();
            sleep(PAUSE).await;
            assert!(t.elapsed() >= PAUSE);
        }
        let stream = TcpStream::connect(addr).await.unwrap();
        for i in 0..ROUNDS {
            stream
                .send_all(Bytes::copy_from_slice(&i.to_le_bytes()))
                .await
                .unwrap();
            let mut got = BytesMut::new();
            while got.len() < 8 {
                let (n, buf) = stream.recv(got, 64).await;
                got = buf;
                assert!(n.unwrap() > 0, "the peer closed early");
            }
            assert_eq!(got[..], i.to_le_bytes());
        }
        for i in 0..ROUNDS {
            let on = submit_to(1, move || async move {
                sleep(PAUSE).await;
                (shard_id(), i)
            })
            .await
            .unwrap();
            assert_eq!(on, (1, i));
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&file_path)
            .map(File::from_std)
            .unwrap();
        for i in 0..ROUNDS {
            file.write_all_at(Bytes::copy_from_slice(&i.to_le_bytes()), 8 * i)
                .await
                .unwrap();
            let (n, buf) = file.read_at(BytesMut::with_capacity(8), 8 * i).await;
            assert_eq!(n.unwrap(), 8);
            assert_eq!(buf[..], i.to_le_bytes());
        }
        for i in 0..ROUNDS {
            let back = spawn_blocking(move || {
                std::thread::sleep(PAUSE);
                i
            })
            .await
            .unwrap();
            assert_eq!(back, i);
        }
    })
    .unwrap();
    peer.join().unwrap();
    let _ = std::fs::remove_file(&path);
    let stats = rt.stats();
    for (shard, s) in stats.iter().enumerate() {
        // Each step above slept: the shards went through the path under test.
        assert!(s.parks >= ROUNDS, "shard {shard}: {} parks", s.parks);
        assert_eq!(s.idle_spins, 0, "shard {shard} spun with the spin off");
    }
}
