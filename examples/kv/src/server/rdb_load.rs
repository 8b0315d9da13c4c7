//! Start-up from the RDB dump (`dir/dbfilename`), when the AOF is off (Redis 7: with
//! `appendonly yes` the AOF is the dataset and the dump is not read).
//!
//! The file is read and decoded once, before any shard starts, and each key goes to the
//! shard that owns it, which rebuilds it with ordinary write commands (the store picks its
//! own encodings); a stream is checked while decoding and stored whole (its nodes, groups
//! and consumers' seen times as the file has them). Keys already expired are dropped, as
//! Redis does when it loads as a primary. A dump that does not decode to the end (torn,
//! corrupt, a checksum that does not match, a module type, a stream whose parts disagree)
//! stops start-up with the file, the byte offset and why; the file is left as it is.

use std::io;
use std::path::Path;

use bytes::Bytes;

use super::config::ServerConfig;
use super::shard::now_ms;
use crate::command::Command;
use crate::rdb::{Decoder, Item, RdbValue};
use crate::routing::shard_of;
use crate::store::{CheckedStream, Store};

/// Elements per rebuild command.
const ITEMS_PER_COMMAND: usize = 256;

/// One key of the dump.
pub(crate) struct LoadedKey {
    key: Bytes,
    value: LoadedValue,
    expire_at_ms: Option<u64>,
}

impl LoadedKey {
    /// A decoded key ready for its shard; a stream is checked for consistency here (the
    /// error says why it is refused).
    pub(crate) fn new(
        key: Bytes,
        value: RdbValue,
        expire_at_ms: Option<u64>,
    ) -> Result<LoadedKey, String> {
        let value = match value {
            RdbValue::Stream(image) => LoadedValue::Stream(
                CheckedStream::new(*image)
                    .map_err(|why| format!("stream {}: {why}", String::from_utf8_lossy(&key)))?,
            ),
            value => LoadedValue::Rebuilt(value),
        };
        Ok(LoadedKey {
            key,
            value,
            expire_at_ms,
        })
    }
}

enum LoadedValue {
    /// Rebuilt by its commands.
    Rebuilt(RdbValue),
    Stream(CheckedStream),
}

/// The dump, split by shard.
#[derive(Default)]
pub(crate) struct Loaded {
    pub per_shard: Vec<Vec<LoadedKey>>,
    /// The function libraries, as a FUNCTION RESTORE payload.
    pub functions: Option<Bytes>,
    pub keys: u64,
    pub expired: u64,
}

/// Reads `dir/dbfilename` (nothing if there is no such file).
pub(crate) fn read(config: &ServerConfig, shards: usize) -> Result<Loaded, String> {
    let name = config.options.named("dbfilename").unwrap_or("dump.rdb");
    let path = config.dir.join(name);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Loaded {
                per_shard: (0..shards).map(|_| Vec::new()).collect(),
                ..Loaded::default()
            })
        }
        Err(e) => return Err(format!("RDB {}: {e}", path.display())),
    };
    let loaded = decode(&bytes, shards, now_ms()).map_err(|why| refusal(&path, &why))?;
    tracing::info!(
        path = %path.display(),
        keys = loaded.keys,
        expired = loaded.expired,
        "DB loaded from disk"
    );
    Ok(loaded)
}

fn refusal(path: &Path, why: &crate::rdb::RdbError) -> String {
    format!(
        "RDB {}: {why}. The file was left as it is and the server did not start \
         (redis-check-rdb can examine it; move it away to start without it)",
        path.display()
    )
}

/// Decodes a whole dump, keys split by shard; keys expired at `now` are dropped.
pub(crate) fn decode(
    bytes: &[u8],
    shards: usize,
    now: u64,
) -> Result<Loaded, crate::rdb::RdbError> {
    let mut loaded = Loaded {
        per_shard: (0..shards.max(1)).map(|_| Vec::new()).collect(),
        ..Loaded::default()
    };
    let mut decoder = Decoder::new(bytes)?;
    let mut codes = Vec::new();
    loop {
        let at = decoder.offset();
        match decoder.next_item()? {
            Item::End => break,
            Item::SelectDb(0) | Item::ResizeDb { .. } | Item::Aux(..) => {}
            Item::SelectDb(db) => {
                return Err(crate::rdb::RdbError {
                    offset: at,
                    message: format!("keys of database {db}: corewire-kv has only database 0"),
                })
            }
            Item::Function(code) => codes.push(code),
            Item::Key {
                key,
                value,
                expire_at_ms,
            } => {
                if expire_at_ms.is_some_and(|at| at < now) {
                    loaded.expired += 1;
                    continue;
                }
                if value.is_empty_collection() {
                    continue;
                }
                let loaded_key = LoadedKey::new(key, value, expire_at_ms).map_err(|message| {
                    crate::rdb::RdbError {
                        offset: at,
                        message,
                    }
                })?;
                loaded.keys += 1;
                let shard = shard_of(&loaded_key.key, shards);
                loaded.per_shard[shard].push(loaded_key);
            }
        }
    }
    if !codes.is_empty() {
        loaded.functions = Some(crate::scripting::functions::payload_of(
            codes.iter().map(|c| &c[..]),
        ));
    }
    Ok(loaded)
}

/// Rebuilds this shard's keys in `store`.
pub(crate) fn apply(store: &mut Store, keys: Vec<LoadedKey>) {
    for LoadedKey {
        key,
        value,
        expire_at_ms,
    } in keys
    {
        let value = match value {
            LoadedValue::Stream(stream) => {
                store.insert_stream(&key, stream, expire_at_ms);
                continue;
            }
            LoadedValue::Rebuilt(value) => value,
        };
        let mut commands: Vec<Vec<Bytes>> = value.rebuild_commands(ITEMS_PER_COMMAND);
        if let Some(at) = expire_at_ms {
            commands.push(vec![
                Bytes::from_static(b"PEXPIREAT"),
                Bytes::from(at.to_string()),
            ]);
        }
        for keyless in commands {
            let mut args = keyless;
            // After the name, or after the subcommand for a container's (XGROUP CREATE key).
            let at = crate::store::key_at(args.first().map_or(&[][..], |name| &name[..]));
            args.insert(at.min(args.len()), key.clone());
            let reply = match Command::parse(args) {
                Ok(command) => store.apply_replayed(command),
                Err(error) => {
                    tracing::error!(?error, key = %String::from_utf8_lossy(&key), "a key of the dump did not load");
                    break;
                }
            };
            if reply.is_error() {
                tracing::error!(?reply, key = %String::from_utf8_lossy(&key), "a key of the dump did not load");
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb::{crc64, encode, Limits, ObjectRef, RdbWriter};

    fn file(db: u64, keys: &[(&str, Option<u64>)]) -> Vec<u8> {
        let mut out = Vec::new();
        RdbWriter::header(&mut out, 1, 1);
        RdbWriter::select_db(&mut out, db, keys.len() as u64, 0);
        for (key, at) in keys {
            let object = ObjectRef::String(b"v");
            encode::write_key(&mut out, key.as_bytes(), &object, *at, &Limits::default());
        }
        let crc = crc64::crc64(&out);
        RdbWriter::finish(&mut out, crc);
        out
    }

    #[test]
    fn keys_go_to_their_shards_and_expired_ones_are_dropped() {
        let bytes = file(
            0,
            &[
                ("a", None),
                ("b", Some(50)),
                ("c", Some(500)),
                ("{a}x", None),
            ],
        );
        let loaded = decode(&bytes, 4, 100).unwrap();
        assert_eq!((loaded.keys, loaded.expired), (3, 1));
        let a = shard_of(b"a", 4);
        let keys: Vec<&[u8]> = loaded.per_shard[a].iter().map(|k| &k.key[..]).collect();
        assert!(keys.contains(&&b"a"[..]) && keys.contains(&&b"{a}x"[..]));
        let mut store = Store::default();
        apply(&mut store, loaded.per_shard.into_iter().flatten().collect());
        assert_eq!(store.key_count(), 3);
    }

    /// A file with one stream key `s`: entries 1-0 (deleted) and 2-0, group `g` with 2-0
    /// pending for `c` (delivered twice, at ms 77).
    fn stream_file(length: u64) -> Vec<u8> {
        use crate::rdb::stream::*;
        let b = |s: &str| Bytes::from(s.to_owned());
        let entry = |ms, deleted| StreamEntry {
            id: Id::new(ms, 0),
            deleted,
            pairs: vec![(b("f"), b("v"))],
        };
        let image = StreamImage {
            nodes: vec![StreamNode {
                master: Id::new(1, 0),
                fields: vec![b("f")],
                entries: vec![entry(1, true), entry(2, false)],
            }],
            length,
            last_id: Id::new(2, 0),
            first_id: Id::new(2, 0),
            max_deleted_entry_id: Id::new(1, 0),
            entries_added: 2,
            groups: vec![StreamGroup {
                name: b("g"),
                last_id: Id::new(2, 0),
                entries_read: Some(2),
                pel: vec![Pending {
                    id: Id::new(2, 0),
                    delivery_time: 77,
                    delivery_count: 2,
                }],
                consumers: vec![StreamConsumer {
                    name: b("c"),
                    seen_time: 77,
                    pending: vec![Id::new(2, 0)],
                }],
            }],
        };
        let mut out = Vec::new();
        RdbWriter::header(&mut out, 1, 1);
        RdbWriter::select_db(&mut out, 0, 1, 0);
        let object = ObjectRef::Stream(Box::new(image));
        encode::write_key(&mut out, b"s", &object, None, &Limits::default());
        let crc = crc64::crc64(&out);
        RdbWriter::finish(&mut out, crc);
        out
    }

    #[test]
    fn streams_load_whole_and_inconsistent_ones_refuse() {
        let loaded = decode(&stream_file(1), 1, 0).unwrap();
        let mut store = Store::default();
        apply(&mut store, loaded.per_shard.into_iter().flatten().collect());
        let run = |store: &mut Store, line: &str| {
            let args = line.split(' ').map(|a| Bytes::from(a.to_owned())).collect();
            store.apply_replayed(Command::parse(args).unwrap())
        };
        assert_eq!(run(&mut store, "XLEN s"), crate::reply::Reply::Integer(1));
        // The delivery count comes from the file, not from a rebuild.
        let pending = format!("{:?}", run(&mut store, "XPENDING s g - + 10"));
        assert!(pending.contains("Integer(2)"), "{pending}");
        let error = decode(&stream_file(5), 1, 0).err().unwrap();
        assert!(
            error.message.contains("stream s: stream length 5"),
            "{error}"
        );
        assert!(error.offset > 9);
    }

    #[test]
    fn other_databases_are_refused_with_their_offset() {
        let bytes = file(3, &[("a", None)]);
        let error = decode(&bytes, 1, 0).err().unwrap();
        assert!(error.message.contains("database 3"), "{error}");
        assert!(error.offset > 9);
    }
}
