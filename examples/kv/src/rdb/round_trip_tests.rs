//! Every encoding written and read back, the file framing, and damage found with its offset.
//! (Files redis-server writes are read in `tests/rdb.rs`, which runs redis-server.)

use bytes::Bytes;

use super::encode::{write_key, write_object};
use super::*;

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_owned())
}

/// Writes `value` as a file with one key and reads it back, checking the type written.
fn round_trip(value: RdbValue, expect_kind: u8) {
    let limits = Limits::default();
    let owned_pairs;
    let object = match &value {
        RdbValue::String(s) => ObjectRef::String(s),
        RdbValue::List(v) => ObjectRef::List(v.iter().map(|e| &e[..]).collect()),
        RdbValue::Set(v) => ObjectRef::Set(v.iter().map(|e| &e[..]).collect()),
        RdbValue::Hash(v) => ObjectRef::Hash(v.iter().map(|(f, x)| (&f[..], &x[..])).collect()),
        RdbValue::ZSet(v) => {
            owned_pairs = v.clone();
            ObjectRef::ZSet(owned_pairs.iter().map(|(m, s)| (&m[..], *s)).collect())
        }
        RdbValue::Stream(image) => ObjectRef::Stream(image.clone()),
        RdbValue::Commands(commands) => {
            let mut records = Vec::new();
            for args in commands {
                records.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
                for arg in args {
                    records.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                    records.extend_from_slice(arg);
                    records.extend_from_slice(b"\r\n");
                }
            }
            ObjectRef::Commands(records)
        }
    };
    let mut side = Vec::new();
    assert_eq!(write_object(&mut side, &object, &limits), expect_kind);

    let mut file = Vec::new();
    RdbWriter::header(&mut file, 1_700_000_000, 1 << 20);
    RdbWriter::select_db(&mut file, 0, 1, 1);
    write_key(
        &mut file,
        b"the-key",
        &object,
        Some(1_900_000_000_123),
        &limits,
    );
    let crc = crc64::crc64(&file);
    RdbWriter::finish(&mut file, crc);

    let mut d = Decoder::new(&file).unwrap();
    let mut aux = Vec::new();
    loop {
        match d.next_item().unwrap() {
            Item::Aux(k, v) => aux.push((k, v)),
            Item::SelectDb(0) | Item::ResizeDb { .. } => {}
            Item::Key {
                key,
                value: got,
                expire_at_ms,
            } => {
                assert_eq!(key, "the-key");
                assert_eq!(expire_at_ms, Some(1_900_000_000_123));
                assert_eq!(got, value);
            }
            Item::End => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(aux[0], (b("redis-ver"), b(REDIS_VERSION)));
    assert_eq!(aux[1], (b("redis-bits"), b("64")));

    // The same value as a DUMP payload.
    let payload = dump_payload(&object, &limits);
    assert_eq!(decode_dump(&payload).unwrap(), value);
}

#[test]
fn strings_in_each_encoding() {
    for s in [
        "",
        "x",
        "0",
        "-128",
        "127",
        "-32768",
        "32767",
        "2147483647",
        "-2147483648",
    ] {
        round_trip(RdbValue::String(b(s)), kind::STRING);
    }
    // Not int-encodable: past i32, leading zero, 12 bytes.
    for s in ["2147483648", "007", "-0", "123456789012"] {
        round_trip(RdbValue::String(b(s)), kind::STRING);
    }
    round_trip(RdbValue::String(b(&"abc".repeat(1000))), kind::STRING);
    let noise: String = (0..200u32)
        .map(|i| char::from(b'!' + (i * 37 % 90) as u8))
        .collect();
    round_trip(RdbValue::String(b(&noise)), kind::STRING);
}

#[test]
fn string_encodings_are_redis_s() {
    let mut out = Vec::new();
    encode::write_string(&mut out, b"12", true);
    assert_eq!(out, [0xc0, 12]);
    out.clear();
    encode::write_string(&mut out, b"1000", true);
    assert_eq!(out, [0xc1, 0xe8, 0x03]);
    out.clear();
    encode::write_string(&mut out, b"100000", true);
    assert_eq!(out, [0xc2, 0xa0, 0x86, 0x01, 0x00]);
    out.clear();
    encode::write_string(&mut out, &[b'a'; 100], true);
    assert_eq!(out[0], 0xc3);
    out.clear();
    encode::write_string(&mut out, &[b'a'; 100], false);
    assert_eq!(out[..2], [0x40, 100]);
}

#[test]
fn lengths_in_each_width() {
    for n in [
        0u64,
        63,
        64,
        16383,
        16384,
        u32::MAX as u64,
        u32::MAX as u64 + 1,
    ] {
        let mut out = Vec::new();
        encode::write_len(&mut out, n);
        out.push(0xff); // so the decoder has an EOF to stop at
        let mut file = b"REDIS0010".to_vec();
        file.push(opcode::SELECTDB);
        file.extend_from_slice(&out);
        let mut d = Decoder::new(&file).unwrap();
        assert_eq!(d.next_item().unwrap(), Item::SelectDb(n));
    }
}

#[test]
fn lists_small_and_multi_node() {
    round_trip(
        RdbValue::List(vec![b("a"), b("1"), b("-70000"), b("")]),
        kind::LIST_QUICKLIST_2,
    );
    let many: Vec<Bytes> = (0..5000).map(|i| b(&format!("element-{i}"))).collect();
    round_trip(RdbValue::List(many), kind::LIST_QUICKLIST_2);
    let big: Vec<Bytes> = (0..4).map(|i| b(&i.to_string().repeat(20_000))).collect();
    round_trip(RdbValue::List(big), kind::LIST_QUICKLIST_2);
}

#[test]
fn sets_intset_and_plain() {
    round_trip(
        RdbValue::Set(vec![b("-5"), b("3"), b("100000"), b("9223372036854775807")]),
        kind::SET_INTSET,
    );
    round_trip(RdbValue::Set(vec![b("a"), b("1")]), kind::SET);
    let many: Vec<Bytes> = (0..600).map(|i| b(&i.to_string())).collect();
    round_trip(RdbValue::Set(many), kind::SET);
}

#[test]
fn hashes_listpack_and_plain() {
    round_trip(
        RdbValue::Hash(vec![(b("f"), b("v")), (b("n"), b("12"))]),
        kind::HASH_LISTPACK,
    );
    round_trip(
        RdbValue::Hash(vec![(b("f"), b(&"v".repeat(65)))]),
        kind::HASH,
    );
    let many = (0..129)
        .map(|i| (b(&format!("f{i}")), b(&i.to_string())))
        .collect();
    round_trip(RdbValue::Hash(many), kind::HASH);
}

#[test]
fn sorted_sets_listpack_and_skiplist() {
    let small = vec![
        (b("neg-inf"), f64::NEG_INFINITY),
        (b("a"), -1.5),
        (b("b"), 0.0),
        (b("c"), 1.0),
        (b("d"), 0.1),
        (b("e"), 1e300),
        (b("inf"), f64::INFINITY),
    ];
    let mut sorted = small.clone();
    sorted.sort_by(|x, y| x.1.total_cmp(&y.1).then(x.0.cmp(&y.0)));
    round_trip(RdbValue::ZSet(sorted.clone()), kind::ZSET_LISTPACK);
    let many: Vec<(Bytes, f64)> = (0..200)
        .map(|i| (b(&format!("m{i:04}")), i as f64 / 3.0))
        .collect();
    // ZSET_2 comes back highest first, as Redis writes it.
    let limits = Limits::default();
    let object = ObjectRef::ZSet(many.iter().map(|(m, s)| (&m[..], *s)).collect());
    let payload = dump_payload(&object, &limits);
    assert_eq!(payload[0], kind::ZSET_2);
    let RdbValue::ZSet(mut back) = decode_dump(&payload).unwrap() else {
        panic!("not a zset");
    };
    back.reverse();
    assert_eq!(back, many);
}

#[test]
fn damage_is_an_error_with_its_offset() {
    let limits = Limits::default();
    let mut file = Vec::new();
    RdbWriter::header(&mut file, 1, 1);
    RdbWriter::select_db(&mut file, 0, 1, 0);
    let key_at = file.len();
    write_key(
        &mut file,
        b"k",
        &ObjectRef::String(b"hello world"),
        None,
        &limits,
    );
    let crc = crc64::crc64(&file);
    RdbWriter::finish(&mut file, crc);
    let read_all = |bytes: &[u8]| -> Result<(), RdbError> {
        let mut d = Decoder::new(bytes)?;
        while d.next_item()? != Item::End {}
        Ok(())
    };
    read_all(&file).unwrap();
    // Truncated inside the value.
    let err = read_all(&file[..key_at + 5]).unwrap_err();
    assert!(err.message.contains("unexpected end"), "{err}");
    assert_eq!(err.offset, key_at + 4);
    // A flipped byte in the value: the checksum catches it, at the checksum's offset.
    let mut flipped = file.clone();
    flipped[key_at + 6] ^= 1;
    let err = read_all(&flipped).unwrap_err();
    assert!(err.message.contains("checksum"), "{err}");
    assert_eq!(err.offset, file.len() - 8);
    // Unknown type, module type, newer version.
    let mut odd = file.clone();
    odd[key_at] = 100;
    assert!(read_all(&odd)
        .unwrap_err()
        .message
        .contains("unknown value type 100"));
    odd[key_at] = kind::MODULE_2;
    assert!(read_all(&odd).unwrap_err().message.contains("module"));
    let mut newer = file.clone();
    newer[5..9].copy_from_slice(b"0011");
    assert!(read_all(&newer).unwrap_err().message.contains("version 11"));
    // A checksum of 0 is not checked (rdbchecksum no).
    let len = flipped.len();
    flipped[len - 8..].fill(0);
    read_all(&flipped).unwrap();
}

#[test]
fn dump_payload_checks() {
    let limits = Limits::default();
    let good = dump_payload(&ObjectRef::String(b"v"), &limits);
    // redis-server 7.0.15's DUMP of the string "v".
    assert_eq!(good, b"\x00\x01v\n\x00\x91\x08\xce\xb2\x198\x8a\xce");
    let mut bad = good.clone();
    bad[2] ^= 1;
    assert_eq!(decode_dump(&bad), Err(decode::DumpError::VersionOrChecksum));
    let mut newer = good.clone();
    newer[3] = 11;
    assert_eq!(
        decode_dump(&newer),
        Err(decode::DumpError::VersionOrChecksum)
    );
    // Trailing bytes inside a checksummed payload: bad format.
    let mut body = good[..3].to_vec();
    body.push(b'x');
    body.extend_from_slice(&[10, 0]);
    let crc = crc64::crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(decode_dump(&body), Err(decode::DumpError::BadFormat));
}

#[test]
fn commands_values_round_trip() {
    round_trip(
        RdbValue::Commands(vec![
            vec![b("XADD"), b("1-1"), b("f"), b("v")],
            vec![b("XGROUP"), b("CREATE"), b("g"), b("0-0")],
        ]),
        kind::COREWIRE_COMMANDS,
    );
}
