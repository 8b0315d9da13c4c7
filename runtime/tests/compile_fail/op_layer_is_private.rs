// The raw op layer (the review's `Op::submit(Recv::new(fd, buf))`) is not reachable.
use corewire_runtime::driver::op::recv::Recv;

fn main() {
    let _ = std::mem::size_of::<Recv>();
}
