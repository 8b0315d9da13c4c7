//! Which RDMA device, port and GID a runtime uses, chosen from the host's listing (sans-I/O:
//! the listing is an argument). rdma_cm picks the device of a connection from its addresses,
//! so a choice comes down to a source address to resolve from (and to listen on): the IP of
//! the chosen GID. With no choice, rdma_cm picks per connection and a shard opens every
//! device it is handed.

use std::fmt;
use std::net::IpAddr;

use corewire_verbs::{DeviceInfo, GidInfo, GidKind, PortState};

/// How the runtime picks its RDMA device (`RdmaConfig::device`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DeviceSelector {
    /// Whatever device rdma_cm resolves each connection's addresses to (several devices
    /// may serve one process).
    #[default]
    Any,
    /// The device with this name (`mlx5_0`, `rxe0`).
    Name(String),
    /// The device whose port carries this network device (`eth1`, `rxe-d0`).
    Netdev(String),
    /// The device that has this IP address in its GID table.
    Ip(IpAddr),
}

/// The outcome: the device to open (and to check each connection against) and the source
/// address connections resolve from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selected {
    pub device: Option<String>,
    pub port: Option<u8>,
    pub gid_index: Option<u32>,
    pub source: Option<IpAddr>,
}

/// The asked device, port or GID is not there; carries the host's listing to say what is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SelectError {
    /// What was asked for.
    pub wanted: String,
    /// The host's devices.
    pub present: Vec<DeviceInfo>,
}

impl fmt::Display for SelectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; ", self.wanted)?;
        if self.present.is_empty() {
            return f.write_str("this host has no RDMA device");
        }
        f.write_str("devices present: ")?;
        for (i, d) in self.present.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SelectError {}

/// Resolve a selection against the host's `devices`. `port` and `gid_index` narrow it
/// further (a GID index picks the source address exactly, as containers need: brpc #3119).
pub fn select(
    devices: &[DeviceInfo],
    selector: &DeviceSelector,
    port: Option<u8>,
    gid_index: Option<u32>,
) -> Result<Selected, SelectError> {
    let fail = |wanted: String| SelectError {
        wanted,
        present: devices.to_vec(),
    };
    // (device, port, gid) candidates the selector allows, in table order.
    let candidates: Vec<(&DeviceInfo, u8, &GidInfo)> = devices
        .iter()
        .flat_map(|d| {
            d.ports
                .iter()
                .filter(move |p| port.is_none_or(|want| want == p.port))
                .flat_map(move |p| p.gids.iter().map(move |g| (d, p.port, g)))
        })
        .filter(|(d, _, g)| match selector {
            DeviceSelector::Any => true,
            DeviceSelector::Name(n) => &d.name == n,
            DeviceSelector::Netdev(n) => g.netdev.as_deref() == Some(n.as_str()),
            DeviceSelector::Ip(ip) => g.ip() == *ip,
        })
        .collect();
    if let DeviceSelector::Name(n) = selector {
        if !devices.iter().any(|d| &d.name == n) {
            return Err(fail(format!("no RDMA device named {n:?}")));
        }
        if let Some(p) = port {
            let d = devices.iter().find(|d| &d.name == n).expect("checked");
            if !d.ports.iter().any(|x| x.port == p) {
                return Err(fail(format!("RDMA device {n:?} has no port {p}")));
            }
        }
    }
    if matches!(selector, DeviceSelector::Any) && gid_index.is_none() && port.is_none() {
        return Ok(Selected::default());
    }
    let chosen = match gid_index {
        Some(i) => candidates.iter().find(|(_, _, g)| g.index == i),
        // The most routable address: RoCE v2 over IPv4, then any non-link-local one.
        None => candidates
            .iter()
            .find(|(_, _, g)| g.kind == GidKind::RoceV2 && g.ip().is_ipv4())
            .or_else(|| candidates.iter().find(|(_, _, g)| !is_link_local(g.ip())))
            .or_else(|| candidates.first()),
    };
    let Some(&(d, p, g)) = chosen else {
        let what = match selector {
            DeviceSelector::Any => "any RDMA device".to_string(),
            DeviceSelector::Name(n) => format!("RDMA device {n:?}"),
            DeviceSelector::Netdev(n) => format!("an RDMA device on network device {n:?}"),
            DeviceSelector::Ip(ip) => format!("an RDMA device with address {ip}"),
        };
        let port_text = port.map(|p| format!(" port {p}")).unwrap_or_default();
        return Err(fail(match gid_index {
            Some(i) => format!("no GID {i} on {what}{port_text}"),
            None => format!("no usable GID on {what}{port_text}"),
        }));
    };
    let port_state = d
        .ports
        .iter()
        .find(|x| x.port == p)
        .map(|x| x.state)
        .unwrap_or(PortState::Down);
    if !matches!(port_state, PortState::Active | PortState::ActiveDefer) {
        return Err(fail(format!(
            "RDMA device {:?} port {p} is not active ({port_state:?})",
            d.name
        )));
    }
    Ok(Selected {
        device: Some(d.name.clone()),
        port: Some(p),
        gid_index: Some(g.index),
        source: Some(g.ip()),
    })
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corewire_verbs::PortInfo;
    use std::net::Ipv4Addr;

    fn gid(index: u32, ip: &str, netdev: &str, kind: GidKind) -> GidInfo {
        let ip: IpAddr = ip.parse().unwrap();
        let gid = match ip {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        GidInfo::new(index, gid, Some(netdev.into()), kind)
    }

    fn host() -> Vec<DeviceInfo> {
        vec![
            DeviceInfo::new(
                "rxe0",
                vec![PortInfo::new(
                    1,
                    PortState::Active,
                    vec![
                        gid(0, "fe80::1", "rxe-d0", GidKind::RoceV2),
                        gid(1, "10.77.0.1", "rxe-d0", GidKind::RoceV2),
                    ],
                )],
            ),
            DeviceInfo::new(
                "rxe1",
                vec![PortInfo::new(
                    1,
                    PortState::Active,
                    vec![gid(0, "127.0.0.1", "lo", GidKind::RoceV2)],
                )],
            ),
            DeviceInfo::new(
                "mlx5_0",
                vec![PortInfo::new(
                    1,
                    PortState::Down,
                    vec![gid(3, "192.168.1.5", "eth1", GidKind::RoceV2)],
                )],
            ),
        ]
    }

    #[test]
    fn no_choice_leaves_it_to_rdma_cm() {
        assert_eq!(
            select(&host(), &DeviceSelector::Any, None, None),
            Ok(Selected::default())
        );
    }

    #[test]
    fn by_name_picks_its_routable_address() {
        let s = select(&host(), &DeviceSelector::Name("rxe0".into()), None, None).unwrap();
        assert_eq!(s.device.as_deref(), Some("rxe0"));
        assert_eq!(s.source, Some(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1))));
        assert_eq!((s.port, s.gid_index), (Some(1), Some(1)));
    }

    #[test]
    fn by_gid_index_picks_exactly_that_address() {
        let s = select(&host(), &DeviceSelector::Name("rxe0".into()), None, Some(0)).unwrap();
        assert_eq!(s.source, Some("fe80::1".parse().unwrap()));
    }

    #[test]
    fn by_netdev_and_by_ip() {
        let s = select(&host(), &DeviceSelector::Netdev("lo".into()), None, None).unwrap();
        assert_eq!(s.device.as_deref(), Some("rxe1"));
        let ip: IpAddr = "10.77.0.1".parse().unwrap();
        let s = select(&host(), &DeviceSelector::Ip(ip), None, None).unwrap();
        assert_eq!((s.device.as_deref(), s.source), (Some("rxe0"), Some(ip)));
    }

    #[test]
    fn a_missing_device_says_what_is_there() {
        let e = select(&host(), &DeviceSelector::Name("mlx5_9".into()), None, None).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("no RDMA device named \"mlx5_9\"; devices present: rxe0"));
        assert!(
            text.contains("rxe1") && text.contains("127.0.0.1 on lo"),
            "{text}"
        );
        let e = select(&[], &DeviceSelector::Name("rxe0".into()), None, None).unwrap_err();
        assert!(e.to_string().ends_with("this host has no RDMA device"));
    }

    #[test]
    fn missing_gids_ports_and_down_ports_are_errors() {
        let rxe0 = DeviceSelector::Name("rxe0".into());
        assert!(select(&host(), &rxe0, None, Some(9))
            .unwrap_err()
            .wanted
            .contains("no GID 9"));
        assert!(select(&host(), &rxe0, Some(2), None)
            .unwrap_err()
            .wanted
            .contains("no port 2"));
        let down = select(&host(), &DeviceSelector::Name("mlx5_0".into()), None, None);
        assert!(down.unwrap_err().wanted.contains("not active"));
        let nowhere: IpAddr = "10.0.0.9".parse().unwrap();
        assert!(select(&host(), &DeviceSelector::Ip(nowhere), None, None).is_err());
    }
}
