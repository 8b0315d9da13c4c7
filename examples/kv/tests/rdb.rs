//! RDB snapshots against redis-server 7.0 itself: files redis-server writes (a workload over
//! every type, small and large) are read by our decoder and loaded by corewire-kv; files
//! corewire-kv writes pass `redis-check-rdb` and load into redis-server with the same keys,
//! values, types and TTLs. Fixtures are made here, at test time, by running redis-server.

mod common;
mod rdb_util;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use bytes::Bytes;
use common::{require_tool, TempDir};
use corewire_kv::rdb::{
    self, crc64, encode, Decoder, Item, Limits, ObjectRef, RdbValue, RdbWriter,
};
use rdb_util::{contents, workload, KeyContent, Redis};

/// redis-server's own dump.rdb after the workload, and the content it had.
fn redis_fixture(dir: &Path) -> (Vec<u8>, BTreeMap<Vec<u8>, KeyContent>) {
    let redis = Redis::start(dir, &["--dbfilename", "redis.rdb"]);
    let mut conn = redis.connect();
    workload(&mut conn);
    let content = contents(&mut conn);
    assert_eq!(conn.call(&["SAVE"]), common::Reply::ok());
    let bytes = std::fs::read(dir.join("redis.rdb")).unwrap();
    (bytes, content)
}

fn decode_all(bytes: &[u8]) -> Vec<(Bytes, RdbValue, Option<u64>)> {
    let mut d = Decoder::new(bytes).unwrap();
    let mut keys = Vec::new();
    loop {
        match d.next_item().unwrap_or_else(|e| panic!("decoding: {e}")) {
            Item::Key {
                key,
                value,
                expire_at_ms,
            } => keys.push((key, value, expire_at_ms)),
            Item::End => return keys,
            _ => {}
        }
    }
}

/// A score compared as a number: redis prints `%.17g`.
fn normalise_scores(content: &mut KeyContent) {
    if content.kind == "zset" {
        for (i, item) in content.value.iter_mut().enumerate() {
            if i % 2 == 1 {
                let text = String::from_utf8(item.clone()).unwrap();
                *item = rdb::format_score(parse_score(&text)).into_bytes();
            }
        }
    }
}

fn parse_score(text: &str) -> f64 {
    match text {
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        t => t.parse().unwrap(),
    }
}

/// The content a decoded value has, as [`contents`] would list it (TTL to within a minute).
fn content_of(value: &RdbValue, expire_at_ms: Option<u64>, now_ms: u64) -> KeyContent {
    let (kind, value) = match value {
        RdbValue::String(s) => ("string", vec![s.to_vec()]),
        RdbValue::List(items) => ("list", items.iter().map(|b| b.to_vec()).collect()),
        RdbValue::Set(items) => {
            let mut m: Vec<Vec<u8>> = items.iter().map(|b| b.to_vec()).collect();
            m.sort();
            ("set", m)
        }
        RdbValue::Hash(pairs) => {
            let mut m: Vec<Vec<u8>> = pairs
                .iter()
                .map(|(f, v)| [&f[..], b"=", &v[..]].concat())
                .collect();
            m.sort();
            ("hash", m)
        }
        RdbValue::ZSet(pairs) => {
            let mut sorted = pairs.clone();
            sorted.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            let flat = sorted
                .iter()
                .flat_map(|(m, s)| [m.to_vec(), rdb::format_score(*s).into_bytes()])
                .collect();
            ("zset", flat)
        }
    };
    let ttl_minutes = expire_at_ms.map(|at| (at as i64 - now_ms as i64 + 30_000) / 60_000);
    KeyContent {
        kind: kind.into(),
        value,
        ttl_minutes,
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn normalised(mut map: BTreeMap<Vec<u8>, KeyContent>) -> BTreeMap<Vec<u8>, KeyContent> {
    map.values_mut().for_each(normalise_scores);
    map
}

fn check_rdb(path: &Path) {
    require_tool("redis-check-rdb");
    let out = Command::new("redis-check-rdb").arg(path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("RDB looks OK!"),
        "redis-check-rdb {}: {text}{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Our decoder reads every encoding redis-server 7.0 writes (intsets, listpacks, quicklists,
/// plain sets and hashes, ZSET_2, LZF and int-encoded strings, expiries); our encoder's
/// file of the same keys passes redis-check-rdb and loads into redis-server unchanged.
#[test]
fn codec_reads_redis_files_and_redis_reads_ours() {
    let dir = TempDir::new("rdb-codec");
    let (bytes, expected) = redis_fixture(dir.path());
    let keys = decode_all(&bytes);
    let now = now_ms();
    let decoded: BTreeMap<Vec<u8>, KeyContent> = keys
        .iter()
        .map(|(k, v, at)| (k.to_vec(), content_of(v, *at, now)))
        .collect();
    let expected = normalised(expected);
    assert_eq!(decoded, expected);

    // Re-encode with our writer.
    let limits = Limits::default();
    let mut file = Vec::new();
    RdbWriter::header(&mut file, now / 1000, 1 << 20);
    RdbWriter::select_db(&mut file, 0, keys.len() as u64, 0);
    for (key, value, at) in &keys {
        let owned;
        let object = match value {
            RdbValue::String(s) => ObjectRef::String(s),
            RdbValue::List(v) => ObjectRef::List(v.iter().map(|e| &e[..]).collect()),
            RdbValue::Set(v) => ObjectRef::Set(v.iter().map(|e| &e[..]).collect()),
            RdbValue::Hash(v) => ObjectRef::Hash(v.iter().map(|(f, x)| (&f[..], &x[..])).collect()),
            RdbValue::ZSet(v) => {
                owned = {
                    let mut s = v.clone();
                    s.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
                    s
                };
                ObjectRef::ZSet(owned.iter().map(|(m, s)| (&m[..], *s)).collect())
            }
        };
        encode::write_key(&mut file, key, &object, *at, &limits);
    }
    let crc = crc64::crc64(&file);
    RdbWriter::finish(&mut file, crc);
    let ours = dir.path().join("ours.rdb");
    std::fs::write(&ours, &file).unwrap();
    check_rdb(&ours);
    let redis = Redis::start(dir.path(), &["--dbfilename", "ours.rdb"]);
    let loaded = normalised(contents(&mut redis.connect()));
    assert_eq!(loaded, expected);
}
