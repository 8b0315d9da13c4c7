// The review's `Evil` op: a safe impl of the op trait that points the kernel at a `&str`.
// There is no public op trait to implement, so it cannot be written.
struct Evil {
    fd: i32,
    target: *const u8,
}

impl corewire_runtime::OpData for Evil {}

fn main() {
    let _ = Evil { fd: 0, target: std::ptr::null() };
}
