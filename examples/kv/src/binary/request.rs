//! Requests: built by clients, turned into [`Command`]s by the server. Decoding goes through
//! [`Command::parse`], so the binary protocol enforces exactly the RESP path's rules and
//! reports the same error texts.

use bytes::Bytes;
use flatbuffers::FlatBufferBuilder;

use super::wire::{self, Method};
use super::{finish, WireError};
use crate::command::{Command, CommandError};

pub fn get(key: &[u8]) -> Bytes {
    let mut b = FlatBufferBuilder::with_capacity(key.len() + 32);
    let key = b.create_vector(key);
    let root = wire::GetRequest::create(&mut b, &wire::GetRequestArgs { key: Some(key) });
    finish(b, root)
}

/// `ttl_ms` 0: no expiry.
pub fn set(key: &[u8], value: &[u8], ttl_ms: u64) -> Bytes {
    let mut b = FlatBufferBuilder::with_capacity(key.len() + value.len() + 48);
    let key = b.create_vector(key);
    let value = b.create_vector(value);
    let root = wire::SetRequest::create(
        &mut b,
        &wire::SetRequestArgs {
            key: Some(key),
            value: Some(value),
            ttl_ms,
        },
    );
    finish(b, root)
}

pub fn del<K: AsRef<[u8]>>(keys: &[K]) -> Bytes {
    let mut b = FlatBufferBuilder::with_capacity(64);
    let keys = key_vector(&mut b, keys);
    let root = wire::DelRequest::create(&mut b, &wire::DelRequestArgs { keys: Some(keys) });
    finish(b, root)
}

pub fn mget<K: AsRef<[u8]>>(keys: &[K]) -> Bytes {
    let mut b = FlatBufferBuilder::with_capacity(64);
    let keys = key_vector(&mut b, keys);
    let root = wire::MGetRequest::create(&mut b, &wire::MGetRequestArgs { keys: Some(keys) });
    finish(b, root)
}

pub fn mset<K: AsRef<[u8]>, V: AsRef<[u8]>>(entries: &[(K, V)]) -> Bytes {
    let mut b = FlatBufferBuilder::with_capacity(64);
    let entries: Vec<_> = entries
        .iter()
        .map(|(key, value)| {
            let key = b.create_vector(key.as_ref());
            let value = b.create_vector(value.as_ref());
            wire::Entry::create(
                &mut b,
                &wire::EntryArgs {
                    key: Some(key),
                    value: Some(value),
                },
            )
        })
        .collect();
    let entries = b.create_vector(&entries);
    let root = wire::MSetRequest::create(
        &mut b,
        &wire::MSetRequestArgs {
            entries: Some(entries),
        },
    );
    finish(b, root)
}

pub fn incr(key: &[u8], delta: i64) -> Bytes {
    let mut b = FlatBufferBuilder::with_capacity(key.len() + 40);
    let key = b.create_vector(key);
    let root = wire::IncrRequest::create(
        &mut b,
        &wire::IncrRequestArgs {
            key: Some(key),
            delta,
        },
    );
    finish(b, root)
}

fn key_vector<'b, K: AsRef<[u8]>>(
    b: &mut FlatBufferBuilder<'b>,
    keys: &[K],
) -> flatbuffers::WIPOffset<flatbuffers::Vector<'b, flatbuffers::ForwardsUOffset<wire::Key<'b>>>> {
    let keys: Vec<_> = keys
        .iter()
        .map(|key| {
            let key = b.create_vector(key.as_ref());
            wire::Key::create(b, &wire::KeyArgs { key: Some(key) })
        })
        .collect();
    b.create_vector(&keys)
}

/// Why a request cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    Wire(WireError),
    /// Well-formed, but the command is invalid (Redis's error text).
    Command(CommandError),
}

/// Decodes request `payload` of `method` into the command it asks for. Keys and values are
/// slices of `payload`, not copies.
pub fn decode(method: u32, payload: &Bytes) -> Result<Command, RequestError> {
    let bytes = |v: flatbuffers::Vector<'_, u8>| payload.slice_ref(v.bytes());
    let word = |w: &'static str| Bytes::from_static(w.as_bytes());
    let args = match Method(method) {
        Method::Get => {
            let req = flatbuffers::root::<wire::GetRequest>(payload).map_err(wire_error)?;
            vec![word("GET"), bytes(req.key())]
        }
        Method::Set => {
            let req = flatbuffers::root::<wire::SetRequest>(payload).map_err(wire_error)?;
            let mut args = vec![word("SET"), bytes(req.key()), bytes(req.value())];
            if req.ttl_ms() > 0 {
                args.push(word("PX"));
                args.push(Bytes::from(req.ttl_ms().to_string()));
            }
            args
        }
        Method::Del => {
            let req = flatbuffers::root::<wire::DelRequest>(payload).map_err(wire_error)?;
            std::iter::once(word("DEL"))
                .chain(req.keys().iter().map(|k| bytes(k.key())))
                .collect()
        }
        Method::MGet => {
            let req = flatbuffers::root::<wire::MGetRequest>(payload).map_err(wire_error)?;
            std::iter::once(word("MGET"))
                .chain(req.keys().iter().map(|k| bytes(k.key())))
                .collect()
        }
        Method::MSet => {
            let req = flatbuffers::root::<wire::MSetRequest>(payload).map_err(wire_error)?;
            let mut args = Vec::with_capacity(1 + 2 * req.entries().len());
            args.push(word("MSET"));
            for entry in req.entries() {
                args.push(bytes(entry.key()));
                args.push(bytes(entry.value()));
            }
            args
        }
        Method::Incr => {
            let req = flatbuffers::root::<wire::IncrRequest>(payload).map_err(wire_error)?;
            vec![
                word("INCRBY"),
                bytes(req.key()),
                Bytes::from(req.delta().to_string()),
            ]
        }
        _ => return Err(RequestError::Wire(WireError::UnknownMethod(method))),
    };
    Command::parse(args).map_err(RequestError::Command)
}

fn wire_error(error: flatbuffers::InvalidFlatbuffer) -> RequestError {
    RequestError::Wire(error.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{SetCommand, SetCondition, SetExpiry};

    fn decoded(method: Method, payload: Bytes) -> Command {
        decode(method.0, &payload).unwrap()
    }

    #[test]
    fn requests_round_trip_into_commands() {
        assert_eq!(
            decoded(Method::Get, get(b"k")),
            Command::Get(Bytes::from("k"))
        );
        assert_eq!(
            decoded(Method::Set, set(b"k", b"v", 1500)),
            Command::Set(SetCommand {
                key: Bytes::from("k"),
                value: Bytes::from("v"),
                condition: SetCondition::Always,
                expiry: SetExpiry::AfterMs(1500),
                get: false,
            })
        );
        assert_eq!(
            decoded(Method::Del, del(&["a", "b"])),
            Command::Del(vec![Bytes::from("a"), Bytes::from("b")])
        );
        assert_eq!(
            decoded(Method::MGet, mget(&[b"a".as_slice()])),
            Command::MGet(vec![Bytes::from("a")])
        );
        assert_eq!(
            decoded(Method::MSet, mset(&[("a", "1"), ("b", "2")])),
            Command::MSet(vec![
                (Bytes::from("a"), Bytes::from("1")),
                (Bytes::from("b"), Bytes::from("2"))
            ])
        );
        assert_eq!(
            decoded(Method::Incr, incr(b"n", -3)),
            Command::IncrBy {
                key: Bytes::from("n"),
                delta: -3
            }
        );
    }

    #[test]
    fn binary_keys_survive() {
        let key = [0u8, 13, 10, 255];
        assert_eq!(
            decoded(Method::Get, get(&key)),
            Command::Get(Bytes::copy_from_slice(&key))
        );
    }

    #[test]
    fn bad_requests_are_errors_not_panics() {
        assert_eq!(
            decode(99, &get(b"k")),
            Err(RequestError::Wire(WireError::UnknownMethod(99)))
        );
        assert!(matches!(
            decode(Method::Get.0, &Bytes::from_static(b"\x01\x02")),
            Err(RequestError::Wire(WireError::Malformed(_)))
        ));
        // An empty DEL is Redis's arity error.
        assert!(matches!(
            decode(Method::Del.0, &del::<&[u8]>(&[])),
            Err(RequestError::Command(CommandError::WrongArity { .. }))
        ));
        // A GET payload sent as SET lacks SET's required value.
        assert!(decode(Method::Set.0, &get(b"k")).is_err());
    }
}
