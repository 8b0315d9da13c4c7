//! Hash commands on both sides of the small/large switch (`fields.rs`): insertion order while
//! small, and HSCAN, HRANDFIELD, HDEL, HGETALL seeing exactly the fields there are after it.

use std::collections::BTreeSet;

use bytes::Bytes;

use super::fields::SMALL_UP_TO;
use super::*;

fn run(store: &mut Store, args: &[&str]) -> Reply {
    let args = args.iter().map(|s| Bytes::from(s.to_string())).collect();
    let reply = store.execute(Command::parse(args).unwrap(), 1, &mut NoLog);
    store.assert_consistent();
    reply
}

fn strings(reply: &Reply) -> Vec<String> {
    match reply {
        Reply::Array(items) => items
            .iter()
            .map(|item| match item {
                Reply::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect(),
        Reply::Bulks(bulks) => (bulks.iter())
            .map(|item| String::from_utf8(item.to_vec()).unwrap())
            .collect(),
        other => panic!("{other:?}"),
    }
}

fn fill(store: &mut Store, count: usize) -> BTreeSet<String> {
    (0..count)
        .map(|i| {
            let field = format!("f{i:04}");
            run(store, &["HSET", "h", &field, &format!("v{i}")]);
            field
        })
        .collect()
}

/// Every field HSCAN returns over a whole iteration, and whether one came twice.
fn scan_all(store: &mut Store) -> (BTreeSet<String>, bool) {
    let (mut seen, mut twice, mut cursor) = (BTreeSet::new(), false, "0".to_string());
    loop {
        let Reply::Array(parts) = run(store, &["HSCAN", "h", &cursor, "COUNT", "7"]) else {
            panic!("not an array");
        };
        let Reply::Bulk(next) = &parts[0] else {
            panic!("no cursor");
        };
        for pair in strings(&parts[1]).chunks(2) {
            twice |= !seen.insert(pair[0].clone());
        }
        cursor = String::from_utf8(next.to_vec()).unwrap();
        if cursor == "0" {
            return (seen, twice);
        }
    }
}

#[test]
fn a_small_hash_lists_fields_in_insertion_order() {
    let mut store = Store::default();
    for field in ["c", "a", "b", "d"] {
        run(&mut store, &["HSET", "h", field, "1"]);
    }
    run(&mut store, &["HDEL", "h", "a"]);
    run(&mut store, &["HSET", "h", "a", "2"]);
    assert_eq!(
        strings(&run(&mut store, &["HKEYS", "h"])),
        ["c", "b", "d", "a"]
    );
}

#[test]
fn commands_see_every_field_across_the_switch() {
    for count in [SMALL_UP_TO, SMALL_UP_TO + 1, 1000] {
        let mut store = Store::default();
        let fields = fill(&mut store, count);
        assert_eq!(
            run(&mut store, &["HLEN", "h"]),
            Reply::Integer(count as i64)
        );
        let keys: BTreeSet<String> = strings(&run(&mut store, &["HKEYS", "h"]))
            .into_iter()
            .collect();
        assert_eq!(keys, fields);
        assert_eq!(scan_all(&mut store), (fields.clone(), false), "{count}");
        let picked = strings(&run(&mut store, &["HRANDFIELD", "h", &count.to_string()]));
        assert_eq!(picked.iter().cloned().collect::<BTreeSet<_>>(), fields);
        assert_eq!(picked.len(), count);
        let repeats = strings(&run(&mut store, &["HRANDFIELD", "h", "-300", "WITHVALUES"]));
        assert_eq!(repeats.len(), 600);
        assert!(repeats.chunks(2).all(|pair| fields.contains(&pair[0])));
        let Reply::Bulk(one) = run(&mut store, &["HRANDFIELD", "h"]) else {
            panic!("no field");
        };
        assert!(fields.contains(std::str::from_utf8(&one).unwrap()));
        assert_eq!(
            run(&mut store, &["HGET", "h", "f0007"]),
            Reply::Bulk(Bytes::from_static(b"v7"))
        );
    }
}

#[test]
fn hdel_empties_a_large_hash_and_the_key_goes() {
    let mut store = Store::default();
    let fields = fill(&mut store, 300);
    for (n, field) in fields.iter().enumerate() {
        assert_eq!(run(&mut store, &["HDEL", "h", field]), Reply::Integer(1));
        assert_eq!(
            run(&mut store, &["HLEN", "h"]),
            Reply::Integer(299 - n as i64)
        );
        if n == 200 {
            let rest: BTreeSet<String> = fields.iter().skip(201).cloned().collect();
            assert_eq!(scan_all(&mut store).0, rest);
        }
    }
    assert_eq!(run(&mut store, &["EXISTS", "h"]), Reply::Integer(0));
    assert_eq!(store.len(), 0);
}

#[test]
fn object_encoding_stays_hashtable_once_grown() {
    let mut store = Store::default();
    fill(&mut store, SMALL_UP_TO);
    let encoding = |store: &mut Store| run(store, &["OBJECT", "ENCODING", "h"]);
    assert_eq!(
        encoding(&mut store),
        Reply::Bulk(Bytes::from_static(b"listpack"))
    );
    run(&mut store, &["HSET", "h", "one-more", "v"]);
    assert_eq!(
        encoding(&mut store),
        Reply::Bulk(Bytes::from_static(b"hashtable"))
    );
    run(&mut store, &["HDEL", "h", "one-more", "f0001"]);
    assert_eq!(
        encoding(&mut store),
        Reply::Bulk(Bytes::from_static(b"hashtable"))
    );
}
