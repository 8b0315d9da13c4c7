//! Kernel floor for the per-core echo benchmark: `echo_floor --addr 127.0.0.1:PORT`.
//!
//! The smallest echo server on the raw `io-uring` crate: one thread, no runtime, no tasks. One
//! multishot accept; per connection one multishot receive into a shared provided-buffer ring;
//! each received chunk is sent straight back from the buffer it landed in, and the buffer goes
//! back to the ring when its send completes. It does not parse frames (echoing the byte stream
//! unchanged is what the client checks), so it shows what the kernel alone costs per request.
//!
//! Per connection at most one send is in flight (further chunks queue behind it), so bytes never
//! reorder; a short send is resubmitted for the rest. When the buffer ring runs dry the kernel
//! ends a multishot receive with ENOBUFS; that connection is re-armed once a buffer returns.

// The floor *is* the raw ring: it hands buffer memory and descriptors to the kernel, which only
// `unsafe` can express. It is a measuring stick in the benchmark crate, not product code.
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use clap::Parser;
use corewire_bench::servers::exit_on_signal;
use corewire_bench::stats_line::ShardCounters;
use io_uring::types::{BufRingEntry, Fd};
use io_uring::{cqueue, opcode, squeue, IoUring};

const BUF_GROUP: u16 = 1;
const ACCEPT: u64 = 0;
const RECV: u64 = 1 << 62;
const SEND: u64 = 2 << 62;
const KIND: u64 = 3 << 62;

/// A provided-buffer ring: `count` entries of `size` bytes each, registered as group BUF_GROUP.
struct BufRing {
    entries: *mut BufRingEntry,
    entries_layout: Layout,
    data: *mut u8,
    data_layout: Layout,
    size: usize,
    mask: u16,
    tail: u16,
}

impl BufRing {
    fn new(ring: &IoUring, count: u16, size: usize) -> io::Result<BufRing> {
        if !count.is_power_of_two() || count > 32768 {
            return Err(io::Error::other("--buffers must be a power of two ≤ 32768"));
        }
        let entries_layout = Layout::from_size_align(
            usize::from(count) * std::mem::size_of::<BufRingEntry>(),
            4096,
        )
        .map_err(io::Error::other)?;
        let data_layout =
            Layout::from_size_align(usize::from(count) * size, 4096).map_err(io::Error::other)?;
        // SAFETY: both layouts have non-zero size (count ≥ 1, size ≥ 1 checked by the caller).
        let (entries, data) = unsafe {
            (
                alloc::alloc_zeroed(entries_layout).cast::<BufRingEntry>(),
                alloc::alloc(data_layout),
            )
        };
        if entries.is_null() || data.is_null() {
            return Err(io::Error::other("cannot allocate the buffer ring"));
        }
        let mut br = BufRing {
            entries,
            entries_layout,
            data,
            data_layout,
            size,
            mask: count - 1,
            tail: 0,
        };
        // SAFETY: `entries` is page-aligned, zeroed and holds `count` entries; it stays
        // allocated until after the ring is dropped (main never returns while serving).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, count, BUF_GROUP, 0)?
        };
        for bid in 0..count {
            br.stage(bid);
        }
        br.publish();
        Ok(br)
    }

    /// Start of buffer `bid` plus `off`.
    fn ptr(&self, bid: u16, off: usize) -> *mut u8 {
        // SAFETY: bid < count and off < size, so the result is inside `data`.
        unsafe { self.data.add(usize::from(bid) * self.size + off) }
    }

    /// Writes buffer `bid` into the next free entry (visible to the kernel after `publish`).
    fn stage(&mut self, bid: u16) {
        // SAFETY: the index is masked into `entries`; the kernel reads only entries below the
        // published tail, and this one is above it until `publish`.
        let entry = unsafe { &mut *self.entries.add(usize::from(self.tail & self.mask)) };
        entry.set_addr(self.ptr(bid, 0) as u64);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes staged buffers visible to the kernel.
    fn publish(&self) {
        // SAFETY: the tail field lives in entry 0 and is only read by the kernel; the release
        // store orders the entry writes before it, as io_uring_buf_ring_advance does.
        let tail = unsafe { &*(BufRingEntry::tail(self.entries).cast::<AtomicU16>()) };
        tail.store(self.tail, Ordering::Release);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts.
        unsafe {
            alloc::dealloc(self.entries.cast(), self.entries_layout);
            alloc::dealloc(self.data, self.data_layout);
        }
    }
}

/// A chunk received into buffer `bid`, `sent` of its `len` bytes already echoed.
struct Chunk {
    bid: u16,
    sent: usize,
    len: usize,
}

struct Conn {
    fd: RawFd,
    queue: VecDeque<Chunk>,
    sending: bool,
    receiving: bool,
    closing: bool,
}

struct Floor {
    ring: IoUring,
    bufs: BufRing,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Connections whose receive ended with ENOBUFS, re-armed when buffers return.
    starved: Vec<usize>,
    counters: Arc<Vec<ShardCounters>>,
}

impl Floor {
    fn push(&mut self, sqe: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every buffer an SQE names stays valid until its CQE: receive buffers are
            // the ring's, send buffers are queued chunks only returned after their send CQE.
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    fn arm_recv(&mut self, id: usize) -> io::Result<()> {
        let Some(conn) = self.conns[id].as_mut() else {
            return Ok(());
        };
        conn.receiving = true;
        let sqe = opcode::RecvMulti::new(Fd(conn.fd), BUF_GROUP)
            .build()
            .user_data(RECV | id as u64);
        self.push(sqe)
    }

    fn send_front(&mut self, id: usize) -> io::Result<()> {
        let Some(conn) = self.conns[id].as_mut() else {
            return Ok(());
        };
        let Some(front) = conn.queue.front() else {
            conn.sending = false;
            return Ok(());
        };
        conn.sending = true;
        let ptr = self.bufs.ptr(front.bid, front.sent);
        let sqe = opcode::Send::new(Fd(conn.fd), ptr, (front.len - front.sent) as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(SEND | id as u64);
        self.push(sqe)
    }

    fn give_back(&mut self, bid: u16) {
        self.bufs.stage(bid);
    }

    fn accepted(&mut self, fd: RawFd) -> io::Result<()> {
        let one: libc::c_int = 1;
        // SAFETY: fd is a socket the kernel just returned; the option value is a live c_int.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        let conn = Conn {
            fd,
            queue: VecDeque::new(),
            sending: false,
            receiving: false,
            closing: false,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.conns[id] = Some(conn);
                id
            }
            None => {
                self.conns.push(Some(conn));
                self.conns.len() - 1
            }
        };
        self.counters[0].accepted();
        self.arm_recv(id)
    }

    /// Closes `id` once nothing is in flight on it; a failed send shuts the socket down first
    /// so the armed receive completes.
    fn maybe_close(&mut self, id: usize) {
        let Some(conn) = self.conns[id].as_mut() else {
            return;
        };
        if !conn.closing || conn.sending {
            return;
        }
        if conn.receiving {
            // SAFETY: fd is still open (closed only below); shutdown ends the receive.
            unsafe { libc::shutdown(conn.fd, libc::SHUT_RDWR) };
            return;
        }
        let conn = self.conns[id].take().expect("checked above");
        // A slot may be reused by the next accept: never re-arm a receive for it later.
        self.starved.retain(|&s| s != id);
        for chunk in conn.queue {
            self.give_back(chunk.bid);
        }
        // SAFETY: no operation on fd is in flight any more; it is closed exactly once.
        unsafe { libc::close(conn.fd) };
        self.free.push(id);
        self.counters[0].closed();
    }

    fn on_recv(&mut self, id: usize, res: i32, flags: u32) -> io::Result<()> {
        let more = cqueue::more(flags);
        let Some(conn) = self.conns[id].as_mut() else {
            return Ok(());
        };
        conn.receiving = more;
        if res > 0 {
            let bid = cqueue::buffer_select(flags).expect("a receive with data names its buffer");
            conn.queue.push_back(Chunk {
                bid,
                sent: 0,
                len: res as usize,
            });
            let idle = !conn.sending;
            if idle {
                self.send_front(id)?;
            }
            if !more {
                self.arm_recv(id)?;
            }
        } else if res == -libc::ENOBUFS {
            if let Some(bid) = cqueue::buffer_select(flags) {
                self.give_back(bid);
            }
            self.starved.push(id);
        } else {
            conn.closing = true;
            self.maybe_close(id);
        }
        Ok(())
    }

    fn on_send(&mut self, id: usize, res: i32) -> io::Result<()> {
        let Some(conn) = self.conns[id].as_mut() else {
            return Ok(());
        };
        conn.sending = false;
        if res < 0 {
            conn.closing = true;
            self.maybe_close(id);
            return Ok(());
        }
        let front = conn.queue.front_mut().expect("a send was in flight");
        front.sent += res as usize;
        if front.sent == front.len {
            let bid = front.bid;
            conn.queue.pop_front();
            self.give_back(bid);
        }
        if self.conns[id].as_ref().is_some_and(|c| c.closing) {
            self.maybe_close(id);
            return Ok(());
        }
        self.send_front(id)
    }

    fn serve(&mut self, listener: RawFd) -> io::Result<()> {
        let accept = opcode::AcceptMulti::new(Fd(listener))
            .build()
            .user_data(ACCEPT);
        self.push(accept.clone())?;
        let mut cqes: Vec<(u64, i32, u32)> = Vec::with_capacity(1024);
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
            cqes.clear();
            cqes.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            for &(data, res, flags) in &cqes {
                let id = (data & !KIND) as usize;
                match data & KIND {
                    ACCEPT => {
                        if res >= 0 {
                            self.accepted(res)?;
                        } else {
                            eprintln!("echo_floor: accept: {}", io::Error::from_raw_os_error(-res));
                        }
                        if !cqueue::more(flags) {
                            self.push(accept.clone())?;
                        }
                    }
                    RECV => self.on_recv(id, res, flags)?,
                    _ => self.on_send(id, res)?,
                }
            }
            self.bufs.publish();
            if !self.starved.is_empty() {
                for id in std::mem::take(&mut self.starved) {
                    self.arm_recv(id)?;
                }
            }
        }
    }
}

fn run(addr: SocketAddr, buffers: u16, buffer_size: usize) -> io::Result<()> {
    let counters: Arc<Vec<ShardCounters>> = Arc::new(vec![ShardCounters::default()]);
    exit_on_signal("echo_floor", Arc::clone(&counters))?;
    let ring = IoUring::new(4096)?;
    let bufs = BufRing::new(&ring, buffers, buffer_size.max(1))?;
    let listener = TcpListener::bind(addr)?;
    eprintln!(
        "echo_floor: listening on {addr} (raw io_uring, {buffers} × {buffer_size} B buffers)"
    );
    let mut floor = Floor {
        ring,
        bufs,
        conns: Vec::new(),
        free: Vec::new(),
        starved: Vec::new(),
        counters,
    };
    floor.serve(listener.as_raw_fd())
}

#[derive(Parser)]
#[command(
    name = "echo_floor",
    about = "Kernel floor for the per-core echo: raw io_uring, one thread",
    args_override_self = true
)]
struct Flags {
    #[arg(long, value_name = "HOST:PORT")]
    addr: SocketAddr,
    /// Provided buffers in the ring.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    buffers: u16,
    /// Bytes per buffer.
    #[arg(long, value_name = "B", default_value_t = 16384)]
    buffer_size: usize,
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    match run(flags.addr, flags.buffers, flags.buffer_size) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo_floor: {e}");
            ExitCode::FAILURE
        }
    }
}
