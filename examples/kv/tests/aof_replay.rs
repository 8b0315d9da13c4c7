//! AOF round trips through the public API: a store logs into an `AofWriter`, the batches form
//! the "file", and replay rebuilds the keyspace, also from torn and corrupted files, and tells
//! a torn tail (safe to cut) from corruption with data after it (not safe).

use bytes::{Bytes, BytesMut};
use corewire_kv::aof::{replay, AofWriter, CorruptReason, Damage, FsyncPolicy, RecordReader};
use corewire_kv::change::{NoLog, WriteOp};
use corewire_kv::resp::ParserLimits;
use corewire_kv::store::{Store, StoreConfig};
use corewire_kv::{Command, Reply};

fn command(line: &str) -> Command {
    Command::parse(line.split(' ').map(|s| Bytes::from(s.to_owned())).collect()).unwrap()
}

const SCRIPT: &[(&str, u64)] = &[
    ("SET a 1", 1_000),
    ("SET b hello EX 100", 1_000),
    ("INCRBY a 41", 1_100),
    ("APPEND b _world", 1_200),
    ("MSET c 3 d 4", 1_300),
    ("SET tmp x PX 10", 1_300),
    ("GET tmp", 1_400), // lazily expires tmp
    ("EXPIRE c 5", 1_500),
    ("DEL d", 1_600),
    ("GETSET a 7", 1_700),
    ("PERSIST b", 1_800),
    ("SET e 5 NX", 1_900),
];

/// Runs the script against a store with an AOF; returns the store, the file image and the
/// record boundaries (LSNs) in the file.
fn build_log() -> (Store, Bytes, Vec<usize>) {
    let mut store = Store::default();
    let mut aof = AofWriter::new(FsyncPolicy::Always, 0, 0);
    let mut file = BytesMut::new();
    let mut boundaries = vec![0];
    for &(line, now) in SCRIPT {
        let before = aof.appended_lsn();
        let reply = store.execute(command(line), now, &mut aof);
        assert!(!reply.is_error(), "{line}: {reply:?}");
        if aof.appended_lsn() > before {
            // One batch per command here so every record boundary is visible.
            let batch = aof.take_batch().expect("a write produced records");
            assert_eq!(batch.offset as usize, file.len());
            file.extend_from_slice(&batch.bytes);
            aof.write_completed(batch.end()).unwrap();
            boundaries.push(file.len());
        }
    }
    (store, file.freeze(), boundaries)
}

fn rebuild(commands: Vec<Command>) -> Store {
    let mut store = Store::default();
    for command in commands {
        let reply = store.apply_replayed(command);
        assert!(!reply.is_error(), "{reply:?}");
    }
    store
}

fn observe(store: &mut Store, now: u64) -> Vec<Reply> {
    ["a", "b", "c", "d", "e", "tmp"]
        .iter()
        .flat_map(|key| {
            [
                store.execute(command(&format!("GET {key}")), now, &mut NoLog),
                store.execute(command(&format!("PTTL {key}")), now, &mut NoLog),
            ]
        })
        .collect()
}

#[test]
fn replay_rebuilds_the_keyspace() {
    let (mut original, file, boundaries) = build_log();
    let replayed = replay(file.clone());
    assert_eq!(replayed.corrupt_tail, None);
    assert_eq!(replayed.valid_len, file.len());
    // GET tmp logged its expiry, SET e NX was a no-op: 11 records for 12 commands.
    assert_eq!(replayed.commands.len(), boundaries.len() - 1);
    let mut rebuilt = rebuild(replayed.commands);
    for now in [2_000, 6_600, 200_000] {
        assert_eq!(
            observe(&mut rebuilt, now),
            observe(&mut original, now),
            "at {now}"
        );
    }
}

#[test]
fn every_truncation_point_yields_the_longest_whole_prefix() {
    let (_, file, boundaries) = build_log();
    for cut in 0..=file.len() {
        let replayed = replay(file.slice(..cut));
        let whole = boundaries.iter().rposition(|&b| b <= cut).unwrap();
        assert_eq!(replayed.valid_len, boundaries[whole], "cut at {cut}");
        assert_eq!(replayed.commands.len(), whole, "cut at {cut}");
        match replayed.corrupt_tail {
            None => assert_eq!(cut, boundaries[whole]),
            Some(tail) => {
                assert_eq!(tail.offset, boundaries[whole]);
                assert_eq!(tail.damage, Damage::TornTail, "cut at {cut}: {tail}");
                assert!(
                    matches!(
                        tail.reason,
                        CorruptReason::TruncatedHeader { .. }
                            | CorruptReason::TruncatedPayload { .. }
                    ),
                    "cut at {cut}: {tail}"
                );
            }
        }
    }
}

#[test]
fn a_flipped_byte_stops_replay_at_its_record() {
    let (_, file, boundaries) = build_log();
    for position in 0..file.len() {
        let mut damaged = file.to_vec();
        damaged[position] ^= 0x40;
        let replayed = replay(Bytes::from(damaged));
        let record = boundaries.iter().rposition(|&b| b <= position).unwrap();
        let tail = replayed.corrupt_tail.expect("damage must be detected");
        assert_eq!(tail.offset, boundaries[record], "flip at {position}");
        // Every record is whole, so a bad one is never a torn tail, even the last one.
        assert_eq!(tail.damage, Damage::Corrupt, "flip at {position}: {tail}");
        assert_eq!(replayed.valid_len, boundaries[record]);
        assert_eq!(replayed.commands.len(), record);
    }
}

#[test]
fn checksummed_garbage_is_reported_as_such() {
    let mut file = BytesMut::new();
    assert!(corewire_kv::aof::encode_record(
        &mut file,
        b"*1\r\n$4\r\nPING\r\n"
    ));
    let replayed = replay(file.clone().freeze());
    assert_eq!(replayed.valid_len, 0);
    assert!(matches!(
        replayed.corrupt_tail.unwrap().reason,
        CorruptReason::InvalidCommand { .. }
    ));

    let mut file = BytesMut::new();
    assert!(corewire_kv::aof::encode_record(&mut file, b"SET a b\r\n"));
    assert_eq!(
        replay(file.freeze()).corrupt_tail.unwrap().reason,
        CorruptReason::MalformedPayload
    );
}

#[test]
fn the_reader_streams_and_stops_after_an_error() {
    let (_, file, boundaries) = build_log();
    let cut = boundaries[3] + 5;
    let mut reader = RecordReader::new(file.slice(..cut));
    assert_eq!(reader.by_ref().take(3).filter(Result::is_ok).count(), 3);
    assert!(matches!(reader.next(), Some(Err(_))));
    assert!(reader.next().is_none());
    assert_eq!(reader.valid_len(), boundaries[3]);
}

#[test]
fn appending_after_recovery_continues_the_file() {
    let (_, file, boundaries) = build_log();
    // Crash mid-record: recover, truncate, append more, replay the whole thing.
    let torn = file.slice(..boundaries[5] + 3);
    let recovered = replay(torn.clone());
    let mut store = rebuild(recovered.commands);
    let mut aof = AofWriter::new(FsyncPolicy::EverySec, recovered.valid_len as u64, 0);
    let mut image = BytesMut::from(&torn[..recovered.valid_len]);
    store.execute(command("SET z last"), 3_000, &mut aof);
    let batch = aof.take_batch().unwrap();
    assert_eq!(batch.offset as usize, image.len());
    image.extend_from_slice(&batch.bytes);
    let replayed = replay(image.freeze());
    assert_eq!(replayed.corrupt_tail, None);
    let mut rebuilt = rebuild(replayed.commands);
    assert_eq!(
        rebuilt.execute(command("GET z"), 3_000, &mut NoLog),
        Reply::Bulk(Bytes::from("last"))
    );
    assert_eq!(observe(&mut rebuilt, 3_000), observe(&mut store, 3_000));
}

/// A crash after the file grew but before its blocks were written leaves zeros: after the
/// last whole record, or after part of the last record. Both are torn tails.
#[test]
fn unwritten_zeros_at_the_end_are_a_torn_tail() {
    let (_, file, boundaries) = build_log();
    let last = boundaries[boundaries.len() - 2];
    for zeros in [1, 7, 8, 9, 100, 5000] {
        let mut image = file.to_vec();
        image.resize(file.len() + zeros, 0);
        let replayed = replay(Bytes::from(image));
        let tail = replayed.corrupt_tail.expect("zeros are not a record");
        assert_eq!(
            (tail.offset, tail.damage),
            (file.len(), Damage::TornTail),
            "{zeros} zeros"
        );
        assert_eq!(replayed.commands.len(), boundaries.len() - 1);

        // The last record's end never reached the disk: its written part, then zeros.
        let mut image = file.to_vec();
        image.truncate(last + 12);
        image.resize(file.len() + zeros, 0);
        let tail = replay(Bytes::from(image)).corrupt_tail.unwrap();
        assert_eq!(
            (tail.offset, tail.damage),
            (last, Damage::TornTail),
            "{zeros} zeros: {tail}"
        );
    }
}

/// Zeros with written records after them are a hole in the middle: corrupt, not torn.
#[test]
fn zeros_followed_by_records_are_corruption() {
    let (_, file, boundaries) = build_log();
    let mut image = file.to_vec();
    image[boundaries[2]..boundaries[4]].fill(0);
    let replayed = replay(Bytes::from(image));
    let tail = replayed.corrupt_tail.unwrap();
    assert_eq!((tail.offset, tail.damage), (boundaries[2], Damage::Corrupt));
    assert_eq!(tail.file_len, file.len());
}

/// A length field that claims more than the rest of the file, over records that are all
/// there, is not a torn write: cutting there would drop those records.
#[test]
fn a_length_pointing_past_whole_records_is_corruption() {
    let (_, file, boundaries) = build_log();
    for record in [0, 3, boundaries.len() - 2] {
        let mut image = file.to_vec();
        let at = boundaries[record];
        image[at..at + 4].copy_from_slice(&(file.len() as u32).to_le_bytes());
        let tail = replay(Bytes::from(image)).corrupt_tail.unwrap();
        assert!(
            matches!(tail.reason, CorruptReason::TruncatedPayload { .. }),
            "{tail}"
        );
        assert_eq!((tail.offset, tail.damage), (at, Damage::Corrupt), "{tail}");
    }
}

/// Replay must read every record the writer can frame, whatever limits the network parser
/// has: here an array longer than the parser's default `max_array_len` (the same mismatch as
/// a value over its 512 MiB bulk limit, which `a_value_over_512_mib_replays` checks at full
/// size).
#[test]
fn replay_reads_records_beyond_the_network_parser_limits() {
    let keys: Vec<Bytes> = (0..ParserLimits::default().max_array_len + 10)
        .map(|i| Bytes::from(i.to_string()))
        .collect();
    let mut aof = AofWriter::new(FsyncPolicy::Always, 0, 0);
    aof.append(WriteOp::Del(&keys));
    let mut store = Store::default();
    store.execute(command("SET after 1"), 1_000, &mut aof);
    let batch = aof.take_batch().unwrap();
    drop(aof);
    let replayed = replay(batch.bytes);
    assert_eq!(replayed.corrupt_tail, None);
    assert_eq!(replayed.commands.len(), 2);
    assert_eq!(replayed.commands[0], Command::Del(keys));
}

/// The review's case at full size: with `--proto-max-bulk-len 1073741824` a value one byte
/// over 512 MiB is accepted and logged; replay must read it back (and the record after it).
/// Needs about 1.1 GiB of memory.
#[test]
fn a_value_over_512_mib_replays() {
    let size = ParserLimits::default().max_bulk_len + 1;
    let mut store = Store::new(StoreConfig {
        max_value_len: 1 << 30,
        ..StoreConfig::default()
    });
    let mut aof = AofWriter::new(FsyncPolicy::Always, 0, 0);
    let big = Command::parse(vec![
        Bytes::from_static(b"SET"),
        Bytes::from_static(b"big"),
        Bytes::from(vec![b'v'; size]),
    ])
    .unwrap();
    assert!(!store.execute(big, 1_000, &mut aof).is_error());
    store.execute(command("SET after 1"), 1_000, &mut aof);
    let batch = aof.take_batch().unwrap();
    drop(aof);
    let replayed = replay(batch.bytes);
    assert_eq!(replayed.corrupt_tail, None, "acknowledged writes lost");
    assert_eq!(replayed.commands.len(), 2);
    let Command::Set(set) = &replayed.commands[0] else {
        panic!("not a SET: {:?}", replayed.commands[0].name());
    };
    assert_eq!(set.value.len(), size);
    assert!(set.value.iter().all(|&b| b == b'v'));
}

/// A log of `SET x 0`, then a transaction block of three writes, then `SET y 9`; returns the
/// image and the offsets where the block starts and ends.
fn log_with_block() -> (Bytes, usize, usize) {
    let mut store = Store::default();
    let mut aof = AofWriter::new(FsyncPolicy::Always, 0, 0);
    let mut run = |aof: &mut AofWriter, line: &str| {
        let reply = store.execute(command(line), 1_000, aof);
        assert!(!reply.is_error(), "{line}: {reply:?}");
    };
    run(&mut aof, "SET x 0");
    let start = aof.appended_lsn() as usize;
    aof.begin_block();
    run(&mut aof, "SET a 1");
    run(&mut aof, "GET a"); // logs nothing
    run(&mut aof, "INCRBY a 2");
    run(&mut aof, "MSET b 2 c 3");
    aof.end_block();
    let end = aof.appended_lsn() as usize;
    // A block that logs nothing leaves no markers.
    aof.begin_block();
    run(&mut aof, "GET a");
    aof.end_block();
    assert_eq!(aof.appended_lsn() as usize, end);
    run(&mut aof, "SET y 9");
    let batch = aof.take_batch().expect("records");
    (batch.bytes, start, end)
}

fn names(commands: &[Command]) -> Vec<&'static str> {
    commands.iter().map(Command::name).collect()
}

#[test]
fn a_transaction_block_replays_whole() {
    let (file, _, _) = log_with_block();
    let replayed = replay(file.clone());
    assert_eq!(replayed.corrupt_tail, None);
    assert_eq!(replayed.valid_len, file.len());
    assert_eq!(
        names(&replayed.commands),
        // INCRBY is logged as the SET of its result.
        ["set", "set", "set", "mset", "set"]
    );
}

#[test]
fn a_log_torn_inside_a_block_keeps_none_of_it() {
    let (file, start, end) = log_with_block();
    for cut in start + 1..end {
        let replayed = replay(file.slice(..cut));
        // Only the write before the block survives, and the cut goes back to the MULTI.
        assert_eq!(names(&replayed.commands), ["set"], "cut at {cut}");
        assert_eq!(replayed.valid_len, start, "cut at {cut}");
        let tail = replayed.corrupt_tail.expect("a torn block is reported");
        assert_eq!(tail.offset, start);
        assert_eq!(tail.damage, Damage::TornTail, "cut at {cut}: {tail}");
    }
    // Cut right after the EXEC: the block is whole.
    let replayed = replay(file.slice(..end));
    assert_eq!(replayed.corrupt_tail, None);
    assert_eq!(replayed.commands.len(), 4);
}

#[test]
fn misplaced_markers_are_corruption() {
    let (file, start, end) = log_with_block();
    let exec = &file[end - 22..end]; // header (8) + "*1\r\n$4\r\nEXEC\r\n" (14)
    let multi = &file[start..start + 24]; // header (8) + "*1\r\n$5\r\nMULTI\r\n" (16)
                                          // EXEC with no block open.
    let mut stray = BytesMut::from(&file[..start]);
    stray.extend_from_slice(exec);
    let replayed = replay(stray.freeze());
    let tail = replayed.corrupt_tail.expect("stray EXEC");
    assert_eq!(
        (tail.offset, tail.damage, tail.reason),
        (
            start,
            Damage::Corrupt,
            CorruptReason::MisplacedTransactionMarker
        )
    );
    // MULTI inside a block: reported at the outer MULTI.
    let mut nested = BytesMut::from(&file[..start + 24]);
    nested.extend_from_slice(multi);
    nested.extend_from_slice(&file[start + 24..]);
    let replayed = replay(nested.freeze());
    let tail = replayed.corrupt_tail.expect("nested MULTI");
    assert_eq!((tail.offset, tail.damage), (start, Damage::Corrupt));
    assert_eq!(names(&replayed.commands), ["set"]);
}
