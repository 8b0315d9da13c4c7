//! Responses: the server encodes a command's [`Reply`]; clients decode the payload. A reply
//! that is a Redis error never gets here: the service turns it into an RPC error status.

use bytes::Bytes;
use flatbuffers::FlatBufferBuilder;

use super::wire::{self, Method};
use super::{finish, WireError};
use crate::reply::Reply;

/// Encodes `reply` (not an error) as `method`'s response table.
pub fn encode(method: u32, reply: Reply) -> Result<Bytes, WireError> {
    let unexpected = |reply: &Reply| WireError::UnexpectedReply(format!("{reply:?}"));
    let mut b = FlatBufferBuilder::with_capacity(64);
    match (Method(method), reply) {
        (Method::Get, reply @ (Reply::Bulk(_) | Reply::NullBulk)) => {
            let value = match reply {
                Reply::Bulk(value) => Some(b.create_vector(&value[..])),
                _ => None,
            };
            let root = wire::GetResponse::create(&mut b, &wire::GetResponseArgs { value });
            Ok(finish(b, root))
        }
        (Method::Set, _) => {
            let root = wire::SetResponse::create(&mut b, &wire::SetResponseArgs {});
            Ok(finish(b, root))
        }
        (Method::MSet, _) => {
            let root = wire::MSetResponse::create(&mut b, &wire::MSetResponseArgs {});
            Ok(finish(b, root))
        }
        (Method::Del, Reply::Integer(deleted)) => {
            let root = wire::DelResponse::create(
                &mut b,
                &wire::DelResponseArgs {
                    deleted: deleted.max(0) as u64,
                },
            );
            Ok(finish(b, root))
        }
        (Method::Incr, Reply::Integer(value)) => {
            let root = wire::IncrResponse::create(&mut b, &wire::IncrResponseArgs { value });
            Ok(finish(b, root))
        }
        (Method::MGet, Reply::Array(items)) => {
            let mut values = Vec::with_capacity(items.len());
            for item in &items {
                let value = match item {
                    Reply::Bulk(value) => Some(b.create_vector(&value[..])),
                    Reply::NullBulk => None,
                    other => return Err(unexpected(other)),
                };
                values.push(wire::Value::create(&mut b, &wire::ValueArgs { value }));
            }
            let values = b.create_vector(&values);
            let root = wire::MGetResponse::create(
                &mut b,
                &wire::MGetResponseArgs {
                    values: Some(values),
                },
            );
            Ok(finish(b, root))
        }
        (Method(m), reply) if Method::ENUM_VALUES.contains(&Method(m)) => Err(unexpected(&reply)),
        (Method(m), _) => Err(WireError::UnknownMethod(m)),
    }
}

/// GET: the value, `None` if the key does not exist. Zero-copy: a slice of `payload`.
pub fn get(payload: &Bytes) -> Result<Option<Bytes>, WireError> {
    let resp = flatbuffers::root::<wire::GetResponse>(payload)?;
    Ok(resp.value().map(|v| payload.slice_ref(v.bytes())))
}

/// SET and MSET carry nothing but success; this checks the payload is that.
pub fn ok(method: u32, payload: &Bytes) -> Result<(), WireError> {
    match Method(method) {
        Method::Set => flatbuffers::root::<wire::SetResponse>(payload).map(|_| ())?,
        Method::MSet => flatbuffers::root::<wire::MSetResponse>(payload).map(|_| ())?,
        _ => return Err(WireError::UnknownMethod(method)),
    }
    Ok(())
}

pub fn del(payload: &Bytes) -> Result<u64, WireError> {
    Ok(flatbuffers::root::<wire::DelResponse>(payload)?.deleted())
}

pub fn incr(payload: &Bytes) -> Result<i64, WireError> {
    Ok(flatbuffers::root::<wire::IncrResponse>(payload)?.value())
}

pub fn mget(payload: &Bytes) -> Result<Vec<Option<Bytes>>, WireError> {
    let resp = flatbuffers::root::<wire::MGetResponse>(payload)?;
    Ok(resp
        .values()
        .iter()
        .map(|v| v.value().map(|v| payload.slice_ref(v.bytes())))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_round_trip() {
        let payload = encode(Method::Get.0, Reply::Bulk(Bytes::from("v"))).unwrap();
        assert_eq!(get(&payload), Ok(Some(Bytes::from("v"))));
        let payload = encode(Method::Get.0, Reply::NullBulk).unwrap();
        assert_eq!(get(&payload), Ok(None));
        let payload = encode(Method::Get.0, Reply::Bulk(Bytes::new())).unwrap();
        assert_eq!(get(&payload), Ok(Some(Bytes::new())));

        let payload = encode(Method::Set.0, Reply::ok()).unwrap();
        assert_eq!(ok(Method::Set.0, &payload), Ok(()));
        let payload = encode(Method::Del.0, Reply::Integer(2)).unwrap();
        assert_eq!(del(&payload), Ok(2));
        let payload = encode(Method::Incr.0, Reply::Integer(-7)).unwrap();
        assert_eq!(incr(&payload), Ok(-7));

        let payload = encode(
            Method::MGet.0,
            Reply::Array(vec![Reply::Bulk(Bytes::from("a")), Reply::NullBulk]),
        )
        .unwrap();
        assert_eq!(mget(&payload), Ok(vec![Some(Bytes::from("a")), None]));
    }

    #[test]
    fn shape_mismatches_are_errors() {
        assert!(matches!(
            encode(Method::Incr.0, Reply::NullBulk),
            Err(WireError::UnexpectedReply(_))
        ));
        assert_eq!(encode(77, Reply::ok()), Err(WireError::UnknownMethod(77)));
        assert!(get(&Bytes::from_static(b"nonsense")).is_err());
    }
}
