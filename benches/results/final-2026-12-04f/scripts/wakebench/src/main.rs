//! Ping-pong between two pinned threads over two eventfds: each side waits for its eventfd,
//! then writes the other's. Mode `read`: blocking read (as perftest -e waits on its channel).
//! Mode `ring`: a multishot poll on the eventfd in an io_uring, waited with submit_and_wait(1),
//! then a nonblocking read (as a corewire shard in event mode). Prints round-trip p50/avg.
use std::os::fd::RawFd;
use std::time::Instant;

fn efd() -> RawFd { unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) } }
fn write1(fd: RawFd) { let v: u64 = 1; unsafe { libc::write(fd, &v as *const u64 as *const _, 8) }; }
fn read_nb(fd: RawFd) -> bool { let mut v: u64 = 0; unsafe { libc::read(fd, &mut v as *mut u64 as *mut _, 8) == 8 } }
fn pin(cpu: usize) { unsafe { let mut s: libc::cpu_set_t = std::mem::zeroed(); libc::CPU_SET(cpu, &mut s); libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &s); } }

enum Waiter { Read(RawFd), Ring(io_uring::IoUring, RawFd) }
impl Waiter {
    fn new(mode: &str, fd: RawFd) -> Waiter {
        match mode {
            "read" => { unsafe { let fl = libc::fcntl(fd, libc::F_GETFL); libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK); } Waiter::Read(fd) }
            _ => {
                let mut b = io_uring::IoUring::builder();
                if mode == "ring-defer" { b.setup_single_issuer().setup_defer_taskrun(); }
                let mut ring = b.build(64).unwrap();
                let e = io_uring::opcode::PollAdd::new(io_uring::types::Fd(fd), libc::POLLIN as u32).multi(true).build().user_data(1);
                unsafe { ring.submission().push(&e).unwrap(); }
                ring.submit().unwrap();
                Waiter::Ring(ring, fd)
            }
        }
    }
    fn wait(&mut self) {
        match self {
            Waiter::Read(fd) => { let mut v: u64 = 0; unsafe { libc::read(*fd, &mut v as *mut u64 as *mut _, 8) }; }
            Waiter::Ring(ring, fd) => loop {
                if read_nb(*fd) { return; }
                ring.submit_and_wait(1).unwrap();
                ring.completion().for_each(drop);
            },
        }
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or("read".into());
    let n: usize = std::env::args().nth(2).map(|s| s.parse().unwrap()).unwrap_or(5000);
    let (a, b) = (efd(), efd());
    let m2 = mode.clone();
    let peer = std::thread::spawn(move || { pin(1); let mut w = Waiter::new(&m2, b); for _ in 0..n { w.wait(); write1(a); } });
    pin(0);
    let mut w = Waiter::new(&mode, a);
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n { let t = Instant::now(); write1(b); w.wait(); lat.push(t.elapsed().as_nanos() as f64 / 1000.0); }
    peer.join().unwrap();
    lat.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let avg: f64 = lat.iter().sum::<f64>() / n as f64;
    println!("{mode}: n={n} p50={:.1}us p90={:.1}us avg={:.1}us", lat[n / 2], lat[n * 9 / 10], avg);
}
