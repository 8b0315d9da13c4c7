// Options structs are `#[non_exhaustive]`: a field added later must not break anyone, so
// outside the crate they are built from `Default` (or a constructor) and assigned to.
use corewire_runtime::net::ListenOptions;
use corewire_runtime::Budget;

fn main() {
    let _ = ListenOptions {
        reuse_port: false,
        backlog: 16,
    };
    let _ = Budget {
        max_messages: None,
        max_bytes: None,
    };
    // What works instead:
    let mut options = ListenOptions::default();
    options.backlog = 16;
    let _ = Budget::new(None, None);
}
