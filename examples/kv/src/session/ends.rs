//! The socket's two ends as the glue reported them (CLIENT LIST's `addr` and `laddr`), in 16
//! bytes when both are IPv4: every connection's session holds them, and two
//! `Option<SocketAddr>` took 64.

use std::net::{SocketAddr, SocketAddrV4};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) enum Ends {
    #[default]
    Unknown,
    V4 {
        peer: SocketAddrV4,
        local: SocketAddrV4,
    },
    /// IPv6, or one end unknown: boxed, as few connections are.
    Other(Box<(Option<SocketAddr>, Option<SocketAddr>)>),
}

impl Ends {
    pub fn new(peer: Option<SocketAddr>, local: Option<SocketAddr>) -> Ends {
        match (peer, local) {
            (None, None) => Ends::Unknown,
            (Some(SocketAddr::V4(peer)), Some(SocketAddr::V4(local))) => Ends::V4 { peer, local },
            ends => Ends::Other(Box::new(ends)),
        }
    }

    /// The client's end.
    pub fn peer(&self) -> Option<SocketAddr> {
        match self {
            Ends::Unknown => None,
            Ends::V4 { peer, .. } => Some(SocketAddr::V4(*peer)),
            Ends::Other(ends) => ends.0,
        }
    }

    /// The server's end.
    pub fn local(&self) -> Option<SocketAddr> {
        match self {
            Ends::Unknown => None,
            Ends::V4 { local, .. } => Some(SocketAddr::V4(*local)),
            Ends::Other(ends) => ends.1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ends;
    use std::net::SocketAddr;

    #[test]
    fn both_ends_come_back_as_given() {
        let v4: SocketAddr = "10.1.2.3:4567".parse().unwrap();
        let local4: SocketAddr = "127.0.0.1:6379".parse().unwrap();
        let v6: SocketAddr = "[fe80::1%2]:4567".parse().unwrap();
        for (peer, local) in [
            (None, None),
            (Some(v4), Some(local4)),
            (Some(v6), Some(local4)),
            (Some(v4), None),
            (None, Some(v6)),
        ] {
            let ends = Ends::new(peer, local);
            assert_eq!((ends.peer(), ends.local()), (peer, local));
        }
        assert!(matches!(Ends::new(Some(v4), Some(local4)), Ends::V4 { .. }));
        assert_eq!(std::mem::size_of::<Ends>(), 16);
    }
}
