//! CLIENT LIST / INFO / KILL / NO-EVICT against `redis-server`: the same scenario runs on
//! both servers and its transcripts must match. Lines are compared on the fields both servers
//! can agree on (name, db, sub, psub, multi, flags, cmd, resp), in the order the listing gives
//! them (by id); ids, addresses and memory figures differ by nature and are checked for shape
//! only. corewire-kv runs with several shards, so the connections live on different shards.

mod common;
mod diff;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{eventually, Server};
use diff::{Conn, Oracle, V};

const WAIT: Duration = Duration::from_secs(30);

/// The fields compared between the two servers.
const COMPARED: &[&str] = &[
    "name", "db", "sub", "psub", "ssub", "multi", "flags", "cmd", "resp",
];

type Line = BTreeMap<String, String>;

fn text(reply: &V) -> String {
    match reply {
        V::Bulk(bytes) | V::Verbatim(bytes) => String::from_utf8(bytes.clone()).unwrap(),
        other => panic!("CLIENT LIST/INFO is a bulk string, got {}", other.show()),
    }
}

/// Parses a listing, checking what can be checked on one server: every line ends with a
/// newline, ids increase, addresses are `ip:port` and the local one is the server's port.
fn lines(reply: &V, port: u16) -> Vec<Line> {
    let text = text(reply);
    assert!(text.is_empty() || text.ends_with('\n'), "{text:?}");
    let lines: Vec<Line> = text
        .lines()
        .map(|line| {
            line.split(' ')
                .map(|field| {
                    let (key, value) = field.split_once('=').expect("key=value");
                    (key.to_owned(), value.to_owned())
                })
                .collect()
        })
        .collect();
    for line in &lines {
        for key in ["addr", "laddr"] {
            let (ip, peer_port) = line[key].rsplit_once(':').expect("ip:port");
            assert!(
                ip.parse::<std::net::IpAddr>().is_ok(),
                "{key}={}",
                line[key]
            );
            assert!(peer_port.parse::<u16>().is_ok(), "{key}={}", line[key]);
        }
        assert_eq!(line["laddr"], format!("127.0.0.1:{port}"));
        for key in ["age", "idle", "qbuf", "omem", "tot-mem", "fd"] {
            assert!(line[key].parse::<i64>().is_ok(), "{key}={}", line[key]);
        }
        assert_eq!(line["user"], "default");
    }
    lines
}

fn ids(lines: &[Line]) -> Vec<u64> {
    lines
        .iter()
        .map(|line| line["id"].parse().unwrap())
        .collect()
}

/// The comparable part of a listing, one string per line.
fn comparable(reply: &V, port: u16) -> Vec<String> {
    lines(reply, port)
        .iter()
        .map(|line| {
            COMPARED
                .iter()
                .map(|key| format!("{key}={}", line[*key]))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn field(reply: &V, port: u16, key: &str) -> String {
    lines(reply, port)[0][key].clone()
}

fn call(conn: &mut Conn, parts: &[&str]) -> V {
    conn.call_str(parts)
}

/// Whether the server closed `conn` (EOF or reset), after any replies still on the way.
fn closed(conn: &mut Conn) -> bool {
    conn.try_read(WAIT).is_err()
}

/// Waits until the listing shows `count` connections with flag `b`.
fn wait_blocked(observer: &mut Conn, count: usize) {
    assert!(
        eventually(WAIT, || {
            let listing = text(&call(observer, &["CLIENT", "LIST"]));
            listing.lines().filter(|l| l.contains(" flags=b ")).count() == count
        }),
        "never {count} blocked clients"
    );
}

struct Servers {
    oracle: Oracle,
    server: Server,
}

impl Servers {
    fn start() -> Servers {
        let (oracle, server) = diff::servers(3, &[]);
        Servers { oracle, server }
    }

    /// Runs `scenario` on both servers (oracle first), compares the transcripts, and returns
    /// the (common) transcript as one text.
    fn compare(&self, scenario: fn(u16) -> Vec<String>) -> String {
        let expected = scenario(self.oracle.port);
        let actual = scenario(self.server.port);
        assert!(!expected.is_empty());
        for (i, (want, got)) in expected.iter().zip(&actual).enumerate() {
            assert_eq!(want, got, "transcript line {i} (redis-server first)");
        }
        assert_eq!(expected.len(), actual.len());
        expected.join("\n")
    }
}

fn listing_scenario(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    let mut observer = Conn::connect(port);
    let mut named = Conn::connect(port);
    out.push(call(&mut named, &["CLIENT", "SETNAME", "alpha"]).show());
    let mut subscriber = Conn::connect(port);
    subscriber.send(&diff::args(&["SUBSCRIBE", "c1", "c2"]));
    out.push(subscriber.read().show());
    out.push(subscriber.read().show());
    out.push(call(&mut subscriber, &["PSUBSCRIBE", "p*"]).show());
    // Refused while subscribed, yet its last command.
    out.push(call(&mut subscriber, &["GET", "k"]).show());
    let mut queued = Conn::connect(port);
    for step in [&["MULTI"][..], &["SET", "k", "v"], &["GET", "k"]] {
        out.push(call(&mut queued, step).show());
    }
    let mut blocked = Conn::connect(port);
    blocked.send(&diff::args(&["BLPOP", "{b}list", "0"]));
    wait_blocked(&mut observer, 1);
    let mut resp3 = Conn::connect(port);
    call(&mut resp3, &["HELLO", "3"]);
    let mut protected = Conn::connect(port);
    out.push(call(&mut protected, &["CLIENT", "NO-EVICT", "on"]).show());

    let all = call(&mut observer, &["CLIENT", "LIST"]);
    let listed = lines(&all, port);
    let listed_ids = ids(&listed);
    assert!(listed_ids.windows(2).all(|w| w[0] < w[1]), "{listed_ids:?}");
    out.extend(comparable(&all, port));
    for kind in ["pubsub", "normal", "NORMAL", "master", "replica", "slave"] {
        out.push(format!("TYPE {kind}"));
        out.extend(comparable(
            &call(&mut observer, &["CLIENT", "LIST", "TYPE", kind]),
            port,
        ));
    }
    // By id: in the order asked, each time asked, unknown ids left out.
    let alpha = call(&mut named, &["CLIENT", "ID"])
        .as_int()
        .unwrap()
        .to_string();
    let by_id = call(
        &mut observer,
        &[
            "CLIENT",
            "LIST",
            "ID",
            &alpha,
            "999999",
            "-3",
            &alpha,
            &listed_ids[0].to_string(),
        ],
    );
    out.push("ID".into());
    out.extend(comparable(&by_id, port));
    // CLIENT INFO: the caller's own line, as CLIENT LIST prints it.
    let info = call(&mut named, &["CLIENT", "INFO"]);
    out.extend(comparable(&info, port));
    assert_eq!(field(&info, port, "id"), alpha);
    let info = call(&mut resp3, &["CLIENT", "INFO"]);
    out.extend(comparable(&info, port));
    // RESET clears the name and leaves NO-EVICT on.
    out.push(call(&mut protected, &["CLIENT", "SETNAME", "beta"]).show());
    out.push(call(&mut protected, &["RESET"]).show());
    out.extend(comparable(&call(&mut protected, &["CLIENT", "INFO"]), port));

    for step in [
        &["CLIENT", "LIST", "TYPE", "foo"][..],
        &["CLIENT", "LIST", "ID", "1", "x"],
        &["CLIENT", "LIST", "ID"],
        &["CLIENT", "LIST", "TYPE"],
        &["CLIENT", "LIST", "foo"],
        &["CLIENT", "LIST", "TYPE", "normal", "x"],
        &["CLIENT", "INFO", "x"],
        &["CLIENT", "KILL"],
        &["CLIENT", "KILL", "ID", "0"],
        &["CLIENT", "KILL", "ID", "x"],
        &["CLIENT", "KILL", "ID", "-5"],
        &["CLIENT", "KILL", "TYPE", "foo", "ID", "0"],
        &["CLIENT", "KILL", "USER", "foo"],
        &["CLIENT", "KILL", "SKIPME", "maybe"],
        &["CLIENT", "KILL", "ID", "1", "SKIPME"],
        &["CLIENT", "KILL", "MAXAGE", "1"],
        &["CLIENT", "KILL", "1.2.3.4:5"],
        &["CLIENT", "KILL", "ID"],
        &["CLIENT", "KILL", "ID", "999999"],
        &["CLIENT", "KILL", "TYPE", "master"],
        &["CLIENT", "KILL", "ADDR", "1.2.3.4:5", "USER", "default"],
        &["CLIENT", "NO-EVICT", "maybe"],
        &["CLIENT", "NO-EVICT", "off"],
        &["CLIENT", "NO-EVICT"],
    ] {
        out.push(format!("{step:?} -> {}", call(&mut observer, step).show()));
    }
    out
}

#[test]
fn listing_and_info_compare_with_redis() {
    let transcript = Servers::start().compare(listing_scenario);
    // The scenario reached the states it is about.
    for state in [
        "name=alpha",
        "sub=2 psub=1 ssub=0 multi=-1 flags=P cmd=get",
        "multi=2 flags=x cmd=get",
        "flags=b cmd=blpop",
        "flags=e",
        "resp=3",
        "cmd=client|list",
    ] {
        assert!(transcript.contains(state), "{state}:\n{transcript}");
    }
}

fn kill_scenario(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    let mut observer = Conn::connect(port);
    let mut idle = Conn::connect(port);
    let idle_addr = field(&call(&mut idle, &["CLIENT", "INFO"]), port, "addr");
    let mut blocked = Conn::connect(port);
    let blocked_id = call(&mut blocked, &["CLIENT", "ID"]).as_int().unwrap();
    let mut subscriber = Conn::connect(port);
    out.push(call(&mut subscriber, &["SUBSCRIBE", "news"]).show());
    let mut watcher = Conn::connect(port);
    out.push(call(&mut watcher, &["WATCH", "{w}k"]).show());
    let mut suicidal = Conn::connect(port);
    let suicidal_id = call(&mut suicidal, &["CLIENT", "ID"]).as_int().unwrap();

    // A client blocked in BLPOP is dropped with its wait: a later push stays in the list.
    blocked.send(&diff::args(&["BLPOP", "{k}q", "0"]));
    wait_blocked(&mut observer, 1);
    let id = blocked_id.to_string();
    out.push(call(&mut observer, &["CLIENT", "KILL", "ID", &id]).show());
    out.push(format!("blocked closed: {}", closed(&mut blocked)));
    out.push(call(&mut observer, &["LPUSH", "{k}q", "x"]).show());
    out.push(call(&mut observer, &["LLEN", "{k}q"]).show());
    wait_blocked(&mut observer, 0);

    // The old form, by address, of an idle client.
    out.push(call(&mut observer, &["CLIENT", "KILL", &idle_addr]).show());
    out.push(format!("idle closed: {}", closed(&mut idle)));
    out.push(call(&mut observer, &["CLIENT", "KILL", &idle_addr]).show());

    // By type: the subscriber goes, and its subscription with it.
    out.push(call(&mut observer, &["CLIENT", "KILL", "TYPE", "pubsub"]).show());
    out.push(format!("subscriber closed: {}", closed(&mut subscriber)));
    out.push(call(&mut observer, &["PUBLISH", "news", "hi"]).show());
    out.push(call(&mut observer, &["PUBSUB", "NUMSUB", "news"]).show());

    // By local address and id, several filters together.
    let laddr = format!("127.0.0.1:{port}");
    let watcher_id = call(&mut watcher, &["CLIENT", "ID"])
        .as_int()
        .unwrap()
        .to_string();
    out.push(
        call(
            &mut observer,
            &[
                "CLIENT",
                "KILL",
                "LADDR",
                &laddr,
                "ID",
                &watcher_id,
                "TYPE",
                "normal",
            ],
        )
        .show(),
    );
    out.push(format!("watcher closed: {}", closed(&mut watcher)));

    // The caller is spared unless SKIPME no; then it gets the reply and is closed.
    let own = suicidal_id.to_string();
    out.push(call(&mut suicidal, &["CLIENT", "KILL", "ID", &own]).show());
    out.push(
        call(
            &mut suicidal,
            &["CLIENT", "KILL", "ID", &own, "SKIPME", "no"],
        )
        .show(),
    );
    out.push(format!("caller closed: {}", closed(&mut suicidal)));

    // The old form kills the caller too.
    let mut own_addr = Conn::connect(port);
    let addr = field(&call(&mut own_addr, &["CLIENT", "INFO"]), port, "addr");
    out.push(call(&mut own_addr, &["CLIENT", "KILL", &addr]).show());
    out.push(format!("old-form caller closed: {}", closed(&mut own_addr)));

    // USER default picks everyone but the caller.
    let mut others: Vec<Conn> = (0..4).map(|_| Conn::connect(port)).collect();
    for other in &mut others {
        out.push(call(other, &["PING"]).show());
    }
    out.push(call(&mut observer, &["CLIENT", "KILL", "USER", "default"]).show());
    for other in &mut others {
        out.push(format!("other closed: {}", closed(other)));
    }
    out.extend(comparable(&call(&mut observer, &["CLIENT", "LIST"]), port));
    out
}

#[test]
fn kill_closes_connections_on_every_shard_as_redis() {
    let transcript = Servers::start().compare(kill_scenario);
    assert!(!transcript.contains("closed: false"), "{transcript}");
}

/// Inside MULTI, CLIENT LIST and KILL run at EXEC, as Redis runs them.
fn transaction_scenario(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    let mut conn = Conn::connect(port);
    let mut victim = Conn::connect(port);
    let victim_id = call(&mut victim, &["CLIENT", "ID"])
        .as_int()
        .unwrap()
        .to_string();
    out.push(call(&mut conn, &["MULTI"]).show());
    out.push(call(&mut conn, &["CLIENT", "KILL", "ID", &victim_id]).show());
    out.push(call(&mut conn, &["CLIENT", "INFO"]).show());
    out.push(call(&mut conn, &["CLIENT", "LIST", "TYPE", "normal"]).show());
    let V::Array(replies) = call(&mut conn, &["EXEC"]) else {
        panic!("EXEC answers an array");
    };
    out.push(replies[0].show());
    out.extend(comparable(&replies[1], port));
    out.extend(comparable(&replies[2], port));
    out.push(format!("victim closed: {}", closed(&mut victim)));
    out
}

#[test]
fn list_and_kill_inside_a_transaction_as_redis() {
    let transcript = Servers::start().compare(transaction_scenario);
    assert!(transcript.contains("victim closed: true"), "{transcript}");
}
