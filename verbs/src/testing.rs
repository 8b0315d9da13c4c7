//! Helpers for RDMA tests. They run inside the soft-RoCE VM (`cargo xtask test` runs every
//! test binary whose target name starts with `rdma` there); on a machine without a device
//! they fail loudly instead of passing silently.

use std::net::{IpAddr, Ipv4Addr};

use crate::device::Context;
use crate::error::VerbsError;

/// What an RDMA test says when it runs where there is no RDMA device.
pub const NO_DEVICE_MESSAGE: &str = "no RDMA device found: RDMA tests run inside the \
     soft-RoCE VM; run `cargo xtask test` (or `cargo xtask vm -- <test binary>`)";

/// The address of `rxe0` in the VM (vm/guest-init.sh puts it on the dummy netdev).
pub const VM_RXE_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

/// Opens the first RDMA device, or panics with [`NO_DEVICE_MESSAGE`].
pub fn require_device() -> Context {
    match Context::open(None) {
        Ok(ctx) => ctx,
        Err(VerbsError::NoDevice { .. }) => panic!("{NO_DEVICE_MESSAGE}"),
        Err(e) => panic!("{NO_DEVICE_MESSAGE} ({e})"),
    }
}

/// The IP address RDMA tests bind and connect to: `COREWIRE_RDMA_ADDR` if set, else the
/// VM's [`VM_RXE_ADDR`].
pub fn rdma_addr() -> IpAddr {
    std::env::var("COREWIRE_RDMA_ADDR")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(IpAddr::V4(VM_RXE_ADDR))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs anywhere: with no device the helper must panic with the hint, with one it must
    /// return it. Either way it never passes silently.
    #[test]
    fn require_device_panics_with_hint_or_returns_a_device() {
        let has_device = Context::open(None).is_ok();
        let result = std::panic::catch_unwind(require_device);
        match result {
            Ok(ctx) => assert!(has_device && !ctx.device_name().is_empty()),
            Err(payload) => {
                assert!(!has_device);
                let msg = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_default();
                assert!(msg.starts_with("no RDMA device found"), "{msg}");
                assert!(msg.contains("cargo xtask test"), "{msg}");
            }
        }
    }
}
