//! What must not compile: the op layer is out of reach of safe code outside the crate (so no
//! one can hand the kernel an arbitrary pointer), and shard-bound types cannot move to
//! another shard (an op's slot key, a timer's registration and a descriptor's ring-side close
//! only mean something on the shard that made them), and the API stays open to additions:
//! options cannot be built by struct literal (they are `#[non_exhaustive]`) and a shard's
//! counters cannot be written from outside.
//!
//! Each case's expected compiler output is checked in next to it (`*.stderr`); after a
//! deliberate change, regenerate with `TRYBUILD=overwrite cargo test -p corewire-runtime
//! --test compile_fail` and review the diff.

#[test]
fn shard_bound_and_private_things_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile_fail/*.rs");
}
