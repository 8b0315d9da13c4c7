//! Protected mode, as Redis 7: while it is on (`--protected-mode yes`, the default; CONFIG
//! SET protected-mode) and the default user has no password (no `--requirepass`), a client
//! connecting from anywhere but the loopback interface gets Redis's `-DENIED` error and is
//! closed.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;

use super::shared::ServerShared;

/// Redis 7.0's reply, word for word (clients and tools match on it).
pub(crate) const DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected \
mode is enabled and no password is set for the default user. In this mode connections are only \
accepted from the loopback interface. If you want to connect from external computers to Redis \
you may adopt one of the following solutions: 1) Just disable protected mode sending the \
command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from \
the same host the server is running, however MAKE SURE Redis is not publicly accessible from \
internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you \
can just disable the protected mode by editing the Redis configuration file, and setting the \
protected mode option to 'no', and then restarting the server. 3) If you started the server \
manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an \
authentication password for the default user. NOTE: You only need to do one of the above \
things in order for the server to start accepting connections from the outside.\r\n";

/// The refusal a new connection from `peer` gets, if protected mode turns it away.
pub(crate) fn refusal(shared: &ServerShared, peer: Option<SocketAddr>) -> Option<&'static [u8]> {
    if !shared.protected_mode.load(Ordering::Relaxed) || shared.session.requirepass().is_some() {
        return None;
    }
    // As Redis, a peer whose address is unknown is not taken for a local one.
    match peer {
        Some(addr) if is_local(addr.ip()) => None,
        _ => Some(DENIED),
    }
}

/// The loopback interface: 127.0.0.0/8 and ::1 (and IPv4 loopback mapped into IPv6).
fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_is_local() {
        for local in ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"] {
            assert!(is_local(local.parse().unwrap()), "{local}");
        }
        for remote in [
            "10.0.0.1",
            "192.0.2.7",
            "::ffff:10.0.0.1",
            "fe80::1",
            "0.0.0.0",
        ] {
            assert!(!is_local(remote.parse().unwrap()), "{remote}");
        }
    }

    #[test]
    fn the_text_is_one_resp_error_line() {
        assert!(DENIED.starts_with(b"-DENIED Redis is running in protected mode"));
        assert!(DENIED.ends_with(b"\r\n"));
        assert_eq!(DENIED.iter().filter(|&&b| b == b'\n').count(), 1);
    }
}
