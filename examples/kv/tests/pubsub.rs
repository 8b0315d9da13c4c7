//! Pub/Sub: the same conversation against `redis-server` (the oracle) and corewire-kv with
//! subscribers and publishers on different shards, ordered delivery to many subscribers, and
//! a subscriber that never reads being dropped at its output limit while the publisher and
//! the other subscribers carry on.

mod common;
mod diff;

use std::time::Duration;

use common::{eventually, Reply, Resp, Server};
use diff::servers;

/// The replies of one scripted conversation on a server at `port`. `sorted` requests'
/// replies are arrays whose order Redis does not define.
fn conversation(port: u16) -> Vec<Reply> {
    let mut sub = Resp::connect(port);
    let mut psub = Resp::connect(port);
    let mut publisher = Resp::connect(port);
    let mut out = Vec::new();
    let read = |conn: &mut Resp, n: usize, out: &mut Vec<Reply>| {
        for _ in 0..n {
            out.push(conn.read().expect("a reply"));
        }
    };
    sub.send(&common::request(&["SUBSCRIBE", "news", "sport", "news"]))
        .unwrap();
    read(&mut sub, 3, &mut out);
    psub.send(&common::request(&["PSUBSCRIBE", "n*", "h?llo"]))
        .unwrap();
    read(&mut psub, 2, &mut out);
    for (channel, message) in [
        ("news", "one"),
        ("hello", "two"),
        ("sport", ""),
        ("none", "x"),
    ] {
        out.push(publisher.call(&["PUBLISH", channel, message]));
    }
    read(&mut sub, 2, &mut out);
    read(&mut psub, 2, &mut out);
    out.push(publisher.call(&["PUBSUB", "NUMSUB", "news", "sport", "none"]));
    out.push(publisher.call(&["PUBSUB", "NUMPAT"]));
    out.push(sorted(publisher.call(&["PUBSUB", "CHANNELS"])));
    out.push(sorted(publisher.call(&["PUBSUB", "CHANNELS", "n*"])));
    out.push(publisher.call(&["PUBSUB", "NOSUCH"]));
    out.push(publisher.call(&["PUBSUB"]));
    // Subscribed mode: only the subscription commands, PING, QUIT and RESET.
    out.push(sub.call(&["GET", "x"]));
    out.push(sub.call(&["PING"]));
    out.push(sub.call(&["PING", "hi"]));
    out.push(sub.call(&["NOSUCH"]));
    sub.send(&common::request(&["UNSUBSCRIBE", "sport", "never"]))
        .unwrap();
    read(&mut sub, 2, &mut out);
    out.push(sub.call(&["UNSUBSCRIBE"]));
    // Out of subscribed mode again.
    out.push(sub.call(&["UNSUBSCRIBE"]));
    out.push(sub.call(&["GET", "x"]));
    out.push(psub.call(&["PUNSUBSCRIBE", "h?llo"]));
    out.push(psub.call(&["RESET"]));
    out.push(psub.call(&["PING"]));
    out.push(publisher.call(&["PUBLISH", "news", "gone"]));
    out
}

fn sorted(reply: Reply) -> Reply {
    match reply {
        Reply::Array(Some(mut items)) => {
            items.sort_by_key(|item| format!("{item:?}"));
            Reply::Array(Some(items))
        }
        other => other,
    }
}

#[test]
fn a_conversation_matches_redis() {
    let (oracle, server) = servers(3, &[]);
    let expected = conversation(oracle.port);
    let actual = conversation(server.port);
    for (i, (e, a)) in expected.iter().zip(&actual).enumerate() {
        assert_eq!(e, a, "reply {i}: redis-server vs corewire-kv");
    }
    assert_eq!(expected.len(), actual.len());
}

/// Subscribers spread over three shards each get every message of a publisher, in order.
#[test]
fn every_subscriber_gets_every_message_in_order() {
    let server = Server::start(&["--shards", "3"]);
    let mut subscribers: Vec<Resp> = (0..9).map(|_| server.connect()).collect();
    for sub in &mut subscribers {
        sub.send(&common::request(&["SUBSCRIBE", "feed"])).unwrap();
        assert_eq!(
            sub.read().unwrap(),
            Reply::Array(Some(vec![
                Reply::bulk("subscribe"),
                Reply::bulk("feed"),
                Reply::Int(1)
            ]))
        );
    }
    let mut publisher = server.connect();
    for i in 0..200 {
        assert_eq!(
            publisher.call(&["PUBLISH", "feed", &i.to_string()]),
            Reply::Int(9)
        );
    }
    for sub in &mut subscribers {
        for i in 0..200 {
            assert_eq!(
                sub.read().unwrap(),
                Reply::Array(Some(vec![
                    Reply::bulk("message"),
                    Reply::bulk("feed"),
                    Reply::bulk(&i.to_string())
                ]))
            );
        }
    }
}

fn numsub(conn: &mut Resp, channel: &str) -> i64 {
    match conn.call(&["PUBSUB", "NUMSUB", channel]) {
        Reply::Array(Some(items)) => match items.as_slice() {
            [_, Reply::Int(n)] => *n,
            other => panic!("NUMSUB: {other:?}"),
        },
        other => panic!("NUMSUB: {other:?}"),
    }
}

/// A subscriber that never reads is dropped once its unread output passes the hard limit;
/// the publisher never waits for it and a reading subscriber gets everything.
#[test]
fn a_subscriber_that_never_reads_is_dropped_at_its_limit() {
    let server = Server::start(&["--shards", "2", "--pubsub-output-limit", "1048576"]);
    let mut stuck = server.connect();
    stuck.send(&common::request(&["SUBSCRIBE", "big"])).unwrap();
    let mut reader = server.connect();
    reader
        .send(&common::request(&["SUBSCRIBE", "big"]))
        .unwrap();
    reader.read().unwrap();
    let mut publisher = server.connect();
    assert!(eventually(Duration::from_secs(10), || numsub(
        &mut publisher,
        "big"
    ) == 2));
    let payload = "x".repeat(64 * 1024);
    let mut published = 0;
    // Kernel socket buffers take a few MiB before the server's own output grows; 4096
    // messages (256 MiB) is far beyond both.
    while numsub(&mut publisher, "big") == 2 {
        assert!(published < 4096, "the stuck subscriber was never dropped");
        let Reply::Int(n) = publisher.call(&["PUBLISH", "big", &payload]) else {
            panic!("PUBLISH answers an integer");
        };
        assert!(n >= 1);
        published += 1;
        // The reading subscriber keeps up.
        let Reply::Array(Some(message)) = reader.read().unwrap() else {
            panic!("a message");
        };
        assert_eq!(message.len(), 3);
    }
    assert_eq!(numsub(&mut publisher, "big"), 1);
    // What the kernel had buffered for it can still be read; then the connection ends.
    let mut drained = 0;
    let end = loop {
        match stuck.read() {
            Ok(_) => drained += 1,
            Err(error) => break error.kind(),
        }
        assert!(drained < 100_000);
    };
    assert!(
        matches!(
            end,
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
        ),
        "the dropped subscriber's connection is closed (read ended with {end:?})"
    );
    eprintln!("stuck subscriber dropped after {published} messages of 64 KiB");
}
