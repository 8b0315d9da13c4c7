//! Keys spread over every shard, and a connection's pipelined replies come back in request
//! order however its requests are split between shards.

mod common;

use std::collections::HashMap;

use common::{request, Reply, Server};

#[test]
fn keys_land_on_all_shards() {
    let server = Server::start(&["--shards", "4"]);
    let mut conn = server.connect();
    let mut args = vec!["MSET".to_owned()];
    for i in 0..400 {
        args.push(format!("user:{i}"));
        args.push(format!("{i}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(conn.call(&args), Reply::ok());
    assert_eq!(conn.call(&["DBSIZE"]), Reply::Int(400));

    let Reply::Bulk(Some(info)) = conn.call(&["INFO", "shards"]) else {
        panic!("INFO is a bulk string");
    };
    let info = String::from_utf8(info).unwrap();
    let per_shard: Vec<u64> = info
        .lines()
        .filter_map(|l| l.split_once(":keys=")?.1.split(',').next()?.parse().ok())
        .collect();
    assert_eq!(per_shard.len(), 4, "{info}");
    assert!(per_shard.iter().all(|&n| n >= 50), "uneven: {per_shard:?}");
    assert_eq!(per_shard.iter().sum::<u64>(), 400);

    // Hash tags keep related keys together: one shard holds all of them.
    let mut tagged = vec!["MSET".to_owned()];
    for i in 0..20 {
        tagged.push(format!("{{cart}}:{i}"));
        tagged.push("x".into());
    }
    let tagged: Vec<&str> = tagged.iter().map(String::as_str).collect();
    assert_eq!(conn.call(&tagged), Reply::ok());
    let Reply::Bulk(Some(after)) = conn.call(&["INFO", "shards"]) else {
        panic!("INFO is a bulk string");
    };
    let after = String::from_utf8(after).unwrap();
    let grown: Vec<u64> = after
        .lines()
        .filter_map(|l| {
            l.split_once(":keys=")?
                .1
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .zip(&per_shard)
        .map(|(now, before)| now - before)
        .collect();
    assert_eq!(grown.iter().filter(|&&g| g == 20).count(), 1, "{grown:?}");
}

/// A local model of what each request must answer.
#[derive(Default)]
struct Model {
    values: HashMap<String, String>,
}

impl Model {
    fn apply(&mut self, args: &[String]) -> Reply {
        match args[0].as_str() {
            "SET" => {
                self.values.insert(args[1].clone(), args[2].clone());
                Reply::ok()
            }
            "GET" => self
                .values
                .get(&args[1])
                .map_or(Reply::nil(), |v| Reply::bulk(v)),
            "MSET" => {
                for pair in args[1..].chunks(2) {
                    self.values.insert(pair[0].clone(), pair[1].clone());
                }
                Reply::ok()
            }
            "MGET" => Reply::Array(Some(
                args[1..]
                    .iter()
                    .map(|k| self.values.get(k).map_or(Reply::nil(), |v| Reply::bulk(v)))
                    .collect(),
            )),
            "INCR" => {
                let n = self
                    .values
                    .get(&args[1])
                    .map_or(0, |v| v.parse::<i64>().unwrap())
                    + 1;
                self.values.insert(args[1].clone(), n.to_string());
                Reply::Int(n)
            }
            "DEL" => {
                let removed = args[1..]
                    .iter()
                    .filter(|k| self.values.remove(*k).is_some())
                    .count();
                Reply::Int(removed as i64)
            }
            other => panic!("model lacks {other}"),
        }
    }
}

#[test]
fn pipelined_replies_stay_in_order_across_shards() {
    let server = Server::start(&["--shards", "3"]);
    let mut conn = server.connect();
    let mut model = Model::default();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut requests: Vec<Vec<String>> = Vec::new();
    for i in 0..3000 {
        let key = |k: u64| format!("k{k}");
        let args: Vec<String> = match next(6) {
            0 => vec!["SET".into(), key(next(64)), format!("v{i}")],
            1 => vec!["GET".into(), key(next(64))],
            2 => {
                let mut a = vec!["MSET".into()];
                for _ in 0..1 + next(6) {
                    a.push(key(next(64)));
                    a.push(format!("m{i}"));
                }
                a
            }
            3 => {
                let mut a = vec!["MGET".into()];
                for _ in 0..1 + next(8) {
                    a.push(key(next(64)));
                }
                a
            }
            4 => vec!["INCR".into(), format!("n{}", next(8))],
            _ => {
                let mut a = vec!["DEL".into()];
                for _ in 0..1 + next(3) {
                    a.push(key(next(64)));
                }
                a
            }
        };
        requests.push(args);
    }
    // Send everything in a few large writes (deep pipeline), then read every reply.
    let mut wire = Vec::new();
    for args in &requests {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        wire.extend_from_slice(&request(&refs));
    }
    for chunk in wire.chunks(64 * 1024) {
        conn.send(chunk).unwrap();
    }
    for (i, args) in requests.iter().enumerate() {
        let expected = model.apply(args);
        let got = conn.read().unwrap_or_else(|e| panic!("reply {i}: {e}"));
        assert_eq!(got, expected, "reply {i} to {args:?}");
    }
}
