//! Echo server on monoio's io_uring driver, one thread per core (each with its own
//! SO_REUSEPORT listener): the thread-per-core peer closest to corewire's design (owned
//! buffers, completion-based I/O).
//!
//! monoio has no signal support, so a helper thread waits for SIGTERM/SIGINT, prints the stats
//! line and exits the process (as the glommio peer does).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use monoio::buf::{IoBuf, IoBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{ListenerOpts, TcpListener, TcpStream};

use super::exit_on_signal;
use crate::frame::{self, HEADER_LEN, MAX_PAYLOAD};
use crate::stats_line::ShardCounters;

/// Smallest read offered, so pipelined small frames are read many at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Serves `addr` on `threads` monoio io_uring runtimes (one listener each) until SIGTERM or
/// SIGINT. The threads are not pinned: taskset decides their CPUs.
pub fn run(addr: SocketAddr, threads: usize) -> io::Result<()> {
    let threads = threads.max(1);
    let counters: Arc<Vec<ShardCounters>> =
        Arc::new((0..threads).map(|_| ShardCounters::default()).collect());
    exit_on_signal("echo_monoio", Arc::clone(&counters))?;
    let mut others = Vec::with_capacity(threads - 1);
    for shard in 1..threads {
        let counters = Arc::clone(&counters);
        others.push(std::thread::spawn(move || serve(addr, shard, counters)));
    }
    serve(addr, 0, counters)?;
    for t in others {
        t.join()
            .map_err(|_| io::Error::other("a monoio thread panicked"))??;
    }
    Ok(())
}

fn serve(addr: SocketAddr, shard: usize, counters: Arc<Vec<ShardCounters>>) -> io::Result<()> {
    let mut rt = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .with_entries(1024)
        .build()?;
    rt.block_on(async move {
        let opts = ListenerOpts::new()
            .reuse_addr(true)
            .reuse_port(true)
            .backlog(1024);
        let listener = TcpListener::bind_with_config(addr, &opts)?;
        eprintln!("echo_monoio: listening on {addr} (io_uring, thread {shard})");
        loop {
            match listener.accept().await {
                Ok((stream, _peer)) => {
                    counters[shard].accepted();
                    let counters = Arc::clone(&counters);
                    monoio::spawn(async move {
                        if let Err(e) = echo(stream).await {
                            tracing::debug!("echo_monoio: connection ended: {e}");
                        }
                        counters[shard].closed();
                    });
                }
                Err(e) => {
                    eprintln!("echo_monoio: accept: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        }
    })
}

/// Echoes complete frames until the peer closes or sends an oversized frame.
async fn echo(mut stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    loop {
        // Room for a chunk, or for the rest of a large frame whose header is in.
        let missing = match frame::payload_len(&buf, MAX_PAYLOAD) {
            Some(Ok(len)) => (HEADER_LEN + len).saturating_sub(buf.len()),
            _ => 0,
        };
        buf.reserve(
            missing
                .max(READ_CHUNK)
                .saturating_sub(buf.capacity() - buf.len()),
        );
        let start = buf.len();
        let cap = buf.capacity();
        let (res, slice) = stream.read(buf.slice_mut(start..cap)).await;
        buf = slice.into_inner();
        if res? == 0 {
            return Ok(());
        }
        let ready = frame::complete_prefix(&buf, MAX_PAYLOAD)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if ready > 0 {
            let (res, slice) = stream.write_all(buf.slice(..ready)).await;
            buf = slice.into_inner();
            res?;
            buf.drain(..ready);
        }
    }
}
