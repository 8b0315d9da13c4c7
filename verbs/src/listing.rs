//! What RDMA devices this host has: names, ports, their state, and the GID table of each
//! port with the network device and address behind every entry (`ibv_query_gid_table`, so
//! it works where sysfs is not the host's, in containers). Used to pick a device, port or GID
//! and to say what is present when the asked one is missing.

use std::ffi::CStr;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use crate::device::{Context, PortState};
use crate::error::{Result, VerbsError};
use crate::sys;

/// One RDMA device.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceInfo {
    /// The device's name (`mlx5_0`, `rxe0`).
    pub name: String,
    /// Its ports, in port order.
    pub ports: Vec<PortInfo>,
}

impl DeviceInfo {
    /// A listing entry, for code that works on a listing it made (device selection tests).
    pub fn new(name: impl Into<String>, ports: Vec<PortInfo>) -> DeviceInfo {
        DeviceInfo {
            name: name.into(),
            ports,
        }
    }
}

/// One port of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortInfo {
    /// The port number (from 1).
    pub port: u8,
    /// Its state (only an active port carries traffic).
    pub state: PortState,
    /// Its valid GID table entries.
    pub gids: Vec<GidInfo>,
}

impl PortInfo {
    /// A port entry, for code that works on a listing it made.
    pub fn new(port: u8, state: PortState, gids: Vec<GidInfo>) -> PortInfo {
        PortInfo { port, state, gids }
    }
}

/// One valid entry of a port's GID table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GidInfo {
    /// The entry's index in the port's GID table.
    pub index: u32,
    /// The GID (for RoCE, an IPv6 or IPv4-mapped address).
    pub gid: Ipv6Addr,
    /// The network device the entry belongs to (RoCE), if any.
    pub netdev: Option<String>,
    /// The kind of GID (InfiniBand, RoCE v1 or v2).
    pub kind: GidKind,
}

impl GidInfo {
    /// A GID entry, for code that works on a listing it made.
    pub fn new(index: u32, gid: Ipv6Addr, netdev: Option<String>, kind: GidKind) -> GidInfo {
        GidInfo {
            index,
            gid,
            netdev,
            kind,
        }
    }
}

/// `ibv_gid_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GidKind {
    /// InfiniBand.
    Ib,
    /// RoCE v1 (Ethernet, not routable).
    RoceV1,
    /// RoCE v2 (over UDP/IP).
    RoceV2,
    /// A kind this crate does not know (its raw value).
    Other(u32),
}

impl GidInfo {
    /// The IP address this GID stands for (RoCE): an IPv4-mapped GID is the IPv4 address.
    pub fn ip(&self) -> IpAddr {
        match self.gid.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(self.gid),
        }
    }
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)?;
        for p in &self.ports {
            write!(f, " [port {} {:?}", p.port, p.state)?;
            for g in &p.gids {
                write!(f, "; gid {} {}", g.index, g.ip())?;
                if let Some(n) = &g.netdev {
                    write!(f, " on {n}")?;
                }
                write!(f, " ({:?})", g.kind)?;
            }
            write!(f, "]")?;
        }
        Ok(())
    }
}

/// Every RDMA device with its ports and GID tables. An empty list (not an error) when the
/// host has none; [`VerbsError::LibraryUnavailable`] when it has no rdma-core libraries.
pub fn list_devices() -> Result<Vec<DeviceInfo>> {
    sys::load()?;
    let mut out = Vec::new();
    for name in device_names() {
        let ctx = Context::open(Some(&name))?;
        out.push(describe(&ctx, name)?);
    }
    Ok(out)
}

fn device_names() -> Vec<String> {
    let mut n = 0;
    // SAFETY: writes the count to n and returns a NULL-terminated array (or NULL), freed
    // below after the names are copied out.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Vec::new();
    }
    let names = (0..usize::try_from(n).unwrap_or(0))
        .map(|i| {
            // SAFETY: i < n entries are valid devices; their names are NUL-terminated and
            // live as long as the list.
            unsafe { CStr::from_ptr(sys::ibv_get_device_name(*list.add(i))) }
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    // SAFETY: list came from ibv_get_device_list and is freed once.
    unsafe { sys::ibv_free_device_list(list) };
    names
}

fn describe(ctx: &Context, name: String) -> Result<DeviceInfo> {
    let attr = ctx.query_device()?;
    let mut ports: Vec<PortInfo> = (1..=attr.phys_port_cnt)
        .map(|port| {
            Ok(PortInfo {
                port,
                state: ctx.query_port(port)?.state,
                gids: Vec::new(),
            })
        })
        .collect::<Result<_>>()?;
    let table_len: usize = ports
        .iter()
        .map(|p| ctx.query_port(p.port).map(|a| a.gid_table_len as usize))
        .sum::<Result<usize>>()?;
    let mut entries = vec![sys::ibv_gid_entry::default(); table_len.max(1)];
    // SAFETY: the context is open; entries has room for table_len entries, and the call
    // writes at most that many.
    let n =
        unsafe { sys::ibv_query_gid_table(ctx.as_ptr(), entries.as_mut_ptr(), entries.len(), 0) };
    if n < 0 {
        return Err(VerbsError::Call {
            call: "ibv_query_gid_table",
            errno: i32::try_from(-n).unwrap_or(libc::EIO),
        });
    }
    for e in &entries[..n as usize] {
        // SAFETY: a GID is 16 raw bytes; every bit pattern is valid.
        let gid = Ipv6Addr::from(unsafe { e.gid.raw });
        let entry = GidInfo {
            index: e.gid_index,
            gid,
            netdev: netdev_name(e.ndev_ifindex),
            kind: match e.gid_type {
                sys::ibv_gid_type::IBV_GID_TYPE_IB => GidKind::Ib,
                sys::ibv_gid_type::IBV_GID_TYPE_ROCE_V1 => GidKind::RoceV1,
                sys::ibv_gid_type::IBV_GID_TYPE_ROCE_V2 => GidKind::RoceV2,
                other => GidKind::Other(other),
            },
        };
        if let Some(p) = ports.iter_mut().find(|p| u32::from(p.port) == e.port_num) {
            p.gids.push(entry);
        }
    }
    for p in &mut ports {
        p.gids.sort_by_key(|g| g.index);
    }
    Ok(DeviceInfo { name, ports })
}

fn netdev_name(ifindex: u32) -> Option<String> {
    if ifindex == 0 {
        return None;
    }
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success buf holds a NUL-terminated name.
    Some(
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn a_v4_mapped_gid_is_its_ipv4_address() {
        let g = GidInfo {
            index: 1,
            gid: Ipv4Addr::new(10, 77, 0, 1).to_ipv6_mapped(),
            netdev: Some("rxe-d0".into()),
            kind: GidKind::RoceV2,
        };
        assert_eq!(g.ip(), IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1)));
        let ll = GidInfo {
            gid: "fe80::1".parse().unwrap(),
            ..g
        };
        assert_eq!(ll.ip(), "fe80::1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn a_listing_names_devices_ports_and_addresses() {
        let d = DeviceInfo {
            name: "rxe0".into(),
            ports: vec![PortInfo {
                port: 1,
                state: PortState::Active,
                gids: vec![GidInfo {
                    index: 1,
                    gid: Ipv4Addr::new(10, 77, 0, 1).to_ipv6_mapped(),
                    netdev: Some("rxe-d0".into()),
                    kind: GidKind::RoceV2,
                }],
            }],
        };
        assert_eq!(
            d.to_string(),
            "rxe0 [port 1 Active; gid 1 10.77.0.1 on rxe-d0 (RoceV2)]"
        );
    }
}
