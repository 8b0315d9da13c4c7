//! `bind`'s value, Redis's list of addresses: `*` is any IPv4 address, `::*` any IPv6 one,
//! and a `-` before an address makes it optional (an address this host does not have is
//! skipped instead of failing). Sans-I/O: what to listen at; `server/resp_listener.rs`
//! listens.

use std::net::IpAddr;

/// Redis's default: every IPv4 address, and every IPv6 one where the host has IPv6.
pub const DEFAULT: &str = "* -::*";

/// At most this many addresses (Redis's `CONFIG_BINDADDR_MAX`).
pub const MAX_ADDRESSES: usize = 16;

/// One address of `bind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddr {
    pub ip: IpAddr,
    /// Written with a leading `-`: skipped when the host does not have it.
    pub optional: bool,
}

/// The addresses of `bind`'s value, in order (none for an empty value); the first that is
/// not an address is the error.
pub fn parse(value: &str) -> Result<Vec<BindAddr>, String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    if words.len() > MAX_ADDRESSES {
        return Err("Too many bind addresses specified.".into());
    }
    words
        .into_iter()
        .map(|word| {
            let (optional, address) = match word.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, word),
            };
            let ip = match address {
                "*" => IpAddr::from([0, 0, 0, 0]),
                "::*" => IpAddr::from([0u16; 8]),
                ip => ip
                    .parse()
                    .map_err(|_| format!("invalid bind address {word:?}"))?,
            };
            Ok(BindAddr { ip, optional })
        })
        .collect()
}

/// The first address (where the other ports — TLS, binary, cluster bus — listen); `None`
/// for an empty value.
pub fn first(value: &str) -> Result<Option<IpAddr>, String> {
    Ok(parse(value)?.first().map(|a| a.ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(ip: &str, optional: bool) -> BindAddr {
        BindAddr {
            ip: ip.parse().unwrap(),
            optional,
        }
    }

    #[test]
    fn the_default_is_any_ipv4_and_optionally_any_ipv6() {
        assert_eq!(
            parse(DEFAULT),
            Ok(vec![addr("0.0.0.0", false), addr("::", true)])
        );
    }

    #[test]
    fn addresses_keep_their_order_and_their_optional_mark() {
        assert_eq!(
            parse("127.0.0.1 -::1  10.0.0.7"),
            Ok(vec![
                addr("127.0.0.1", false),
                addr("::1", true),
                addr("10.0.0.7", false)
            ])
        );
        assert_eq!(parse(""), Ok(vec![]));
        assert_eq!(first(""), Ok(None));
        assert_eq!(first("-::1 127.0.0.1"), Ok(Some("::1".parse().unwrap())));
    }

    #[test]
    fn what_is_no_address_is_refused() {
        assert!(parse("999.999.999.999").is_err());
        assert!(parse("127.0.0.1 -").is_err());
        assert!(parse("localhost").is_err());
        let seventeen = vec!["127.0.0.1"; MAX_ADDRESSES + 1].join(" ");
        assert!(parse(&seventeen).is_err());
        let sixteen = vec!["127.0.0.1"; MAX_ADDRESSES].join(" ");
        assert_eq!(parse(&sixteen).map(|a| a.len()), Ok(MAX_ADDRESSES));
    }
}
