//! `std::net::SocketAddr` <-> C `sockaddr` for the rdma_cm address calls.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// A socket address laid out as the C API wants it.
pub(crate) struct RawSockAddr {
    storage: libc::sockaddr_storage,
}

impl RawSockAddr {
    pub(crate) fn new(addr: SocketAddr) -> Self {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
                unsafe {
                    std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin)
                };
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo().to_be(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
                unsafe {
                    std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6)
                };
            }
        }
        RawSockAddr { storage }
    }

    /// For the C calls, which take a non-const `struct sockaddr *` but only read it.
    pub(crate) fn as_mut_ptr<T>(&mut self) -> *mut T {
        (&mut self.storage as *mut libc::sockaddr_storage).cast()
    }
}

/// Reads a C socket address; `None` for a null pointer or a family other than IPv4/IPv6
/// (e.g. an unbound id reports AF_UNSPEC).
///
/// # Safety
/// `sa` must be null or point to a socket address valid for its family's size.
pub(crate) unsafe fn from_raw(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: the caller guarantees sa points to a socket address of its family's size.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let sin = &*(sa as *const libc::sockaddr_in);
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                let sin6 = &*(sa as *const libc::sockaddr_in6);
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    u32::from_be(sin6.sin6_flowinfo),
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(addr: SocketAddr) -> Option<SocketAddr> {
        let mut raw = RawSockAddr::new(addr);
        // SAFETY: raw holds a complete sockaddr_in/in6 for addr's family.
        unsafe { from_raw(raw.as_mut_ptr()) }
    }

    #[test]
    fn ipv4_round_trips_with_network_byte_order() {
        let addr: SocketAddr = "10.77.0.1:18515".parse().unwrap();
        let mut raw = RawSockAddr::new(addr);
        let sin: *const libc::sockaddr_in = raw.as_mut_ptr();
        // SAFETY: raw holds a sockaddr_in.
        let sin = unsafe { &*sin };
        assert_eq!(sin.sin_port, 18515u16.to_be());
        assert_eq!(sin.sin_addr.s_addr.to_ne_bytes(), [10, 77, 0, 1]);
        assert_eq!(round_trip(addr), Some(addr));
    }

    #[test]
    fn ipv6_round_trips() {
        let addr: SocketAddr = "[fe80::1%3]:7471".parse().unwrap();
        assert_eq!(round_trip(addr), Some(addr));
    }

    #[test]
    fn unknown_family_and_null_read_as_none() {
        // SAFETY: all-zero sockaddr_storage is valid and has family AF_UNSPEC.
        let storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        // SAFETY: points to a full sockaddr_storage / is null.
        unsafe {
            assert_eq!(
                from_raw((&storage as *const libc::sockaddr_storage).cast()),
                None
            );
            assert_eq!(from_raw(std::ptr::null()), None);
        }
    }
}
