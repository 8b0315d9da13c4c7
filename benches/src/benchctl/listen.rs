//! Finds listening TCP sockets in /proc/net/tcp{,6} — used to know when a server is up without
//! connecting to it (a probe connection would show up in the server's accept counts).

/// State code of a listening socket in /proc/net/tcp.
const LISTEN: &str = "0A";

/// Number of listening sockets on `port` in the text of /proc/net/tcp or /proc/net/tcp6.
pub fn count_listeners(proc_net_tcp: &str, port: u16) -> usize {
    proc_net_tcp
        .lines()
        .skip(1)
        .filter(|line| {
            let mut fields = line.split_whitespace();
            let local = fields.nth(1);
            let state = fields.nth(1);
            let local_port = local
                .and_then(|l| l.rsplit_once(':'))
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            local_port == Some(port) && state == Some(LISTEN)
        })
        .count()
}

/// Listening sockets on `port` right now (IPv4 and IPv6).
pub fn listeners_on(port: u16) -> usize {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .map(|text| count_listeners(&text, port))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:4E21 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:4E21 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:4E21 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 3 1
   3: 0100007F:4E22 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1
";

    #[test]
    fn counts_only_listeners_on_the_port() {
        assert_eq!(count_listeners(SAMPLE, 0x4E21), 2);
        assert_eq!(count_listeners(SAMPLE, 0x4E22), 1);
        assert_eq!(count_listeners(SAMPLE, 1), 0);
        assert_eq!(count_listeners("", 1), 0);
    }

    #[test]
    fn sees_a_real_listener() {
        use socket2::{Domain, Socket, Type};
        let addr: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
        let socket = || {
            let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
            s.set_reuse_port(true).unwrap();
            s
        };
        // A bound socket that never listens keeps the port ours after the listener closes,
        // so a test running in parallel cannot pick it up and make the count flaky.
        let holder = socket();
        holder.bind(&addr.into()).unwrap();
        let port = holder.local_addr().unwrap().as_socket().unwrap().port();
        let listener = socket();
        listener.bind(&holder.local_addr().unwrap()).unwrap();
        listener.listen(8).unwrap();
        assert_eq!(listeners_on(port), 1);
        drop(listener);
        // Another test of this binary may fork a child at any moment: until that child execs,
        // it holds a copy of every descriptor (close-on-exec or not), so the socket can stay
        // listening a little after our close. It must be gone once the child has exec'd.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while listeners_on(port) != 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(listeners_on(port), 0);
        drop(holder);
    }
}
