//! Start-up from the RDB dump (`dir/dbfilename`), when the AOF is off (Redis 7: with
//! `appendonly yes` the AOF is the dataset and the dump is not read).
//!
//! The file is read and decoded once, before any shard starts, and each key goes to the
//! shard that owns it, which rebuilds it with ordinary write commands (the store picks its
//! own encodings). Keys already expired are dropped, as Redis does when it loads as a
//! primary. A dump that does not decode to the end (torn, corrupt, a checksum that does not
//! match, a module type) stops start-up with the file, the byte offset and why; the file is
//! left as it is.

use std::io;
use std::path::Path;

use bytes::Bytes;

use super::config::ServerConfig;
use super::shard::now_ms;
use crate::command::Command;
use crate::rdb::{Decoder, Item, RdbValue};
use crate::routing::shard_of;
use crate::store::Store;

/// Elements per rebuild command.
const ITEMS_PER_COMMAND: usize = 256;

/// One key of the dump.
pub(crate) struct LoadedKey {
    key: Bytes,
    value: RdbValue,
    expire_at_ms: Option<u64>,
}

impl LoadedKey {
    pub(crate) fn new(key: Bytes, value: RdbValue, expire_at_ms: Option<u64>) -> LoadedKey {
        LoadedKey {
            key,
            value,
            expire_at_ms,
        }
    }
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
                loaded.keys += 1;
                let shard = shard_of(&key, shards);
                loaded.per_shard[shard].push(LoadedKey {
                    key,
                    value,
                    expire_at_ms,
                });
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

    #[test]
    fn other_databases_are_refused_with_their_offset() {
        let bytes = file(3, &[("a", None)]);
        let error = decode(&bytes, 1, 0).err().unwrap();
        assert!(error.message.contains("database 3"), "{error}");
        assert!(error.offset > 9);
    }
}
