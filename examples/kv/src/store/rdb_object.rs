//! A stored value as the RDB encoder sees it ([`ObjectRef`]): what SAVE, BGSAVE and DUMP
//! write. Borrowed, so writing a key copies nothing but the encoded bytes.

use super::value::Value;
use crate::rdb::ObjectRef;

/// `value` for the encoder; a sorted set in its score order (the listpack form needs it).
pub(crate) fn object_of(value: &Value) -> ObjectRef<'_> {
    match value {
        Value::Str(s) => ObjectRef::String(s.as_slice()),
        Value::List(list) => ObjectRef::List(list.iter().collect()),
        Value::Set(set) => ObjectRef::Set(set.iter().map(|m| m.as_slice()).collect()),
        Value::Hash(hash) => ObjectRef::Hash(
            hash.map
                .iter()
                .map(|(f, v)| (f.as_slice(), v.as_slice()))
                .collect(),
        ),
        Value::ZSet(zset) => ObjectRef::ZSet(
            zset.order
                .iter()
                .map(|(score, member)| (member.as_slice(), score.0))
                .collect(),
        ),
    }
}
