//! Redis's type conversions between replies and Lua values, both ways, in RESP2 and RESP3
//! (Redis 7.0's `script_lua.c`).
//!
//! Reply → Lua (what `redis.call` returns): integers are numbers, bulk strings strings,
//! arrays tables, a status `{ok=...}`, an error `{err=...}`, a null `false` (RESP2) or `nil`
//! (RESP3). With `redis.setresp(3)` a reply Redis types in RESP3 becomes `{map={...}}`,
//! `{set={...}}`, `{double=n}`, `{verbatim_string={format=..., string=...}}`.
//!
//! Lua → reply (what the script returns): strings bulk, numbers integers (truncated), `true`
//! 1 and `false` a null (after `redis.setresp(3)`: RESP3 booleans, 1 and 0 in RESP2), `{ok=...}` a status, `{err=...}` an error,
//! `{double=n}`, `{map=...}`, `{set=...}`, `{big_number=...}`, `{verbatim_string=...}` their
//! RESP3 types (downgraded for a RESP2 client), other tables arrays up to their first nil.
//! Tables are read raw (metatables are ignored), as Redis reads them.

use bytes::Bytes;
use mlua::{Lua, Table, Value};

use super::call::CallReply;
use crate::reply::Reply;
use crate::session::resp3::Shape;

/// How replies reach Lua: the protocol the script asked for with `redis.setresp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    Resp2,
    Resp3,
}

/// Nesting past this depth answers "reached lua stack limit" in place of the table.
const MAX_DEPTH: usize = 200;

/// A number as Redis writes a Lua number it passes to a command (`fpconv_dtoa`: the shortest
/// form that reads back the same; integers without a fraction).
pub fn number_text(n: f64) -> String {
    if n.is_finite() && n == n.trunc() && n.abs() < 1e17 {
        format!("{}", n as i64)
    } else if n.is_nan() {
        "nan".into()
    } else if n.is_infinite() {
        if n > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        let plain = format!("{n}");
        let exp = format!("{n:e}");
        if exp.len() < plain.len() {
            // Rust writes 1e20; C's %g style writes 1e+20.
            match exp.find('e') {
                Some(i) if !exp[i + 1..].starts_with('-') => {
                    format!("{}e+{}", &exp[..i], &exp[i + 1..])
                }
                _ => exp,
            }
        } else {
            plain
        }
    }
}

/// A reply as `redis.call` returns it, a plain bulk string left as bytes to push (see
/// [`CallReply`]).
pub fn reply_to_call(
    lua: &Lua,
    reply: &Reply,
    shape: &Shape,
    mode: ReplyMode,
) -> mlua::Result<CallReply> {
    match reply {
        Reply::Bulk(data)
            if mode == ReplyMode::Resp2 || !matches!(shape, Shape::Double | Shape::Verbatim) =>
        {
            CallReply::bulk(lua, data)
        }
        _ => reply_to_lua(lua, reply, shape, mode).map(CallReply::Value),
    }
}

/// A reply as `redis.call` returns it. Error replies become `{err=...}` tables (the caller
/// raises them for `redis.call`).
pub fn reply_to_lua(
    lua: &Lua,
    reply: &Reply,
    shape: &Shape,
    mode: ReplyMode,
) -> mlua::Result<Value> {
    let string =
        |bytes: &[u8]| -> mlua::Result<Value> { Ok(Value::String(lua.create_string(bytes)?)) };
    Ok(match reply {
        Reply::Integer(n) => Value::Number(*n as f64),
        Reply::Simple(text) => {
            let table = lua.create_table()?;
            table.raw_set("ok", lua.create_string(text)?)?;
            Value::Table(table)
        }
        Reply::Error(text) => {
            let table = lua.create_table()?;
            table.raw_set(
                "err",
                lua.create_string(super::env::error_text(&{
                    let mut t = b"-".to_vec();
                    t.extend_from_slice(text);
                    t
                }))?,
            )?;
            Value::Table(table)
        }
        Reply::NullBulk | Reply::NullArray => match mode {
            ReplyMode::Resp2 => Value::Boolean(false),
            ReplyMode::Resp3 => Value::Nil,
        },
        Reply::Bulk(data) => match (mode, shape) {
            (ReplyMode::Resp3, Shape::Double) => double_table(lua, data)?,
            (ReplyMode::Resp3, Shape::Verbatim) => {
                let inner = lua.create_table()?;
                inner.raw_set("format", "txt")?;
                inner.raw_set("string", lua.create_string(data)?)?;
                let table = lua.create_table()?;
                table.raw_set("verbatim_string", inner)?;
                Value::Table(table)
            }
            _ => string(data)?,
        },
        Reply::Bulks(bulks) => {
            let items = bulks.to_replies();
            return reply_to_lua(lua, &Reply::Array(items), shape, mode);
        }
        Reply::Dual { resp2, .. } => return reply_to_lua(lua, resp2, shape, mode),
        // Introspection's own maps, sets and doubles: as the shaped replies they stand for.
        Reply::Map(items) => {
            return reply_to_lua(lua, &Reply::Array(items.clone()), &Shape::Map, mode)
        }
        Reply::Set(items) => {
            return reply_to_lua(lua, &Reply::Array(items.clone()), &Shape::Set, mode)
        }
        Reply::Double(text) => {
            return reply_to_lua(lua, &Reply::Bulk(text.clone()), &Shape::Double, mode)
        }
        Reply::Array(items) => match (mode, shape) {
            (ReplyMode::Resp3, Shape::Map) if items.len() % 2 == 0 => {
                let map = lua.create_table()?;
                for pair in items.chunks(2) {
                    let key = reply_to_lua(lua, &pair[0], &Shape::Plain, mode)?;
                    let value = reply_to_lua(lua, &pair[1], &Shape::Plain, mode)?;
                    map.raw_set(key, value)?;
                }
                let table = lua.create_table()?;
                table.raw_set("map", map)?;
                Value::Table(table)
            }
            (ReplyMode::Resp3, Shape::Set) => {
                let set = lua.create_table()?;
                for item in items {
                    set.raw_set(reply_to_lua(lua, item, &Shape::Plain, mode)?, true)?;
                }
                let table = lua.create_table()?;
                table.raw_set("set", set)?;
                Value::Table(table)
            }
            (ReplyMode::Resp3, Shape::Doubles) => {
                let table = lua.create_table()?;
                for (i, item) in items.iter().enumerate() {
                    table.raw_set(i + 1, reply_to_lua(lua, item, &Shape::Double, mode)?)?;
                }
                Value::Table(table)
            }
            (ReplyMode::Resp3, Shape::ScorePairs | Shape::Pairs) if items.len() % 2 == 0 => {
                let second = if *shape == Shape::ScorePairs {
                    Shape::Double
                } else {
                    Shape::Plain
                };
                let table = lua.create_table()?;
                for (i, pair) in items.chunks(2).enumerate() {
                    let inner = lua.create_table()?;
                    inner.raw_set(1, reply_to_lua(lua, &pair[0], &Shape::Plain, mode)?)?;
                    inner.raw_set(2, reply_to_lua(lua, &pair[1], &second, mode)?)?;
                    table.raw_set(i + 1, inner)?;
                }
                Value::Table(table)
            }
            (ReplyMode::Resp3, Shape::MemberScore) if items.len() == 2 => {
                let table = lua.create_table()?;
                table.raw_set(1, reply_to_lua(lua, &items[0], &Shape::Plain, mode)?)?;
                table.raw_set(2, reply_to_lua(lua, &items[1], &Shape::Double, mode)?)?;
                Value::Table(table)
            }
            _ => {
                let table = lua.create_table_with_capacity(items.len(), 0)?;
                for (i, item) in items.iter().enumerate() {
                    table.raw_set(i + 1, reply_to_lua(lua, item, &Shape::Plain, mode)?)?;
                }
                Value::Table(table)
            }
        },
    })
}

fn double_table(lua: &Lua, text: &[u8]) -> mlua::Result<Value> {
    let value: f64 = std::str::from_utf8(text)
        .ok()
        .and_then(|t| match t {
            "inf" | "+inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            t => t.parse().ok(),
        })
        .unwrap_or(0.0);
    let table = lua.create_table()?;
    table.raw_set("double", value)?;
    Ok(Value::Table(table))
}

/// The field `redis.pcall` sets on the error table it returns (Redis 7.0's name): the error
/// is in INFO errorstats already, so the script returning it does not count it again.
pub const COUNTED_ERROR_FIELD: &str = "ignore_error_stats_update";

/// A script's return value as a RESP2 reply: RESP3-only types written as RESP2 shows them
/// (a map as a flat array, a double as its text, ...).
pub fn lua_to_reply(value: &Value, depth: usize, mode: ReplyMode) -> Reply {
    if depth > MAX_DEPTH {
        return Reply::error("ERR reached lua stack limit");
    }
    match value {
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(n) => Reply::Integer(*n),
        Value::Number(n) => Reply::Integer(if n.is_nan() { 0 } else { *n as i64 }),
        Value::Boolean(true) => Reply::Integer(1),
        // `redis.setresp(3)` makes booleans RESP3 booleans, which RESP2 writes as 1 and 0;
        // otherwise false is a null.
        Value::Boolean(false) => match mode {
            ReplyMode::Resp2 => Reply::NullBulk,
            ReplyMode::Resp3 => Reply::Integer(0),
        },
        Value::Table(table) => table_to_reply(table, depth, mode),
        _ => Reply::NullBulk,
    }
}

fn field(table: &Table, name: &str) -> Value {
    table.raw_get::<Value>(name).unwrap_or(Value::Nil)
}

fn table_to_reply(table: &Table, depth: usize, mode: ReplyMode) -> Reply {
    if let Value::String(err) = field(table, "err") {
        let text: Vec<u8> = err
            .as_bytes()
            .iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect();
        return Reply::Error(Bytes::from(text));
    }
    if let Value::String(ok) = field(table, "ok") {
        let text: Vec<u8> = ok
            .as_bytes()
            .iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect();
        return Reply::Simple(Bytes::from(text));
    }
    match field(table, "double") {
        Value::Number(n) => return Reply::Bulk(Bytes::from(double_text(n))),
        Value::Integer(n) => return Reply::Bulk(Bytes::from(double_text(n as f64))),
        _ => {}
    }
    if let Value::String(big) = field(table, "big_number") {
        return Reply::Bulk(Bytes::copy_from_slice(&big.as_bytes()));
    }
    if let Value::Table(inner) = field(table, "verbatim_string") {
        if let Value::String(text) = field(&inner, "string") {
            return Reply::Bulk(Bytes::copy_from_slice(&text.as_bytes()));
        }
    }
    if let Value::Table(map) = field(table, "map") {
        let mut items = Vec::new();
        for pair in map.pairs::<Value, Value>() {
            let Ok((key, value)) = pair else { continue };
            items.push(lua_to_reply(&key, depth + 1, mode));
            items.push(lua_to_reply(&value, depth + 1, mode));
        }
        return Reply::Array(items);
    }
    if let Value::Table(set) = field(table, "set") {
        let mut items = Vec::new();
        for pair in set.pairs::<Value, Value>() {
            let Ok((key, _)) = pair else { continue };
            items.push(lua_to_reply(&key, depth + 1, mode));
        }
        return Reply::Array(items);
    }
    let mut items = Vec::new();
    for i in 1.. {
        let item: Value = table.raw_get(i).unwrap_or(Value::Nil);
        if item == Value::Nil {
            break;
        }
        items.push(lua_to_reply(&item, depth + 1, mode));
    }
    Reply::Array(items)
}

/// A script's return value as a reply for either protocol: the RESP2 reply, plus the RESP3
/// bytes when they differ beyond what re-typing a plain reply gives (booleans, doubles, maps,
/// sets, big numbers, verbatim strings). `mode` is the protocol the script chose last with
/// `redis.setresp`: under RESP3 its booleans are booleans, under RESP2 true is 1 and false a
/// null (`_` to a RESP3 caller).
pub fn script_reply(value: &Value, mode: ReplyMode) -> Reply {
    let resp2 = lua_to_reply(value, 0, mode);
    if let (Reply::Error(text), Value::Table(table)) = (&resp2, value) {
        if field(table, COUNTED_ERROR_FIELD) == Value::Boolean(true) {
            return Reply::counted_error(text.clone());
        }
    }
    if !has_resp3_types(value, 0, mode) {
        return resp2;
    }
    let mut resp3 = bytes::BytesMut::new();
    lua_to_resp3(value, 0, mode, &mut resp3);
    Reply::Dual {
        resp2: Box::new(resp2),
        resp3: resp3.freeze(),
    }
}

fn has_resp3_types(value: &Value, depth: usize, mode: ReplyMode) -> bool {
    match value {
        Value::Boolean(_) => mode == ReplyMode::Resp3,
        Value::Table(table) if depth <= MAX_DEPTH => {
            if ["err", "ok"]
                .iter()
                .any(|name| matches!(field(table, name), Value::String(_)))
            {
                return false;
            }
            if ["double", "map", "set", "big_number", "verbatim_string"]
                .iter()
                .any(|name| !matches!(field(table, name), Value::Nil))
            {
                return true;
            }
            (1..)
                .map_while(|i| match table.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => None,
                    Ok(item) => Some(item),
                })
                .any(|item| has_resp3_types(&item, depth + 1, mode))
        }
        _ => false,
    }
}

fn header(out: &mut bytes::BytesMut, kind: u8, len: usize) {
    out.extend_from_slice(&[kind]);
    out.extend_from_slice(len.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Redis 7.0's `luaReplyToRedisReply` for a RESP3 caller.
fn lua_to_resp3(value: &Value, depth: usize, mode: ReplyMode, out: &mut bytes::BytesMut) {
    if depth > MAX_DEPTH {
        out.extend_from_slice(b"-ERR reached lua stack limit\r\n");
        return;
    }
    match value {
        Value::Boolean(b) if mode == ReplyMode::Resp3 => {
            out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" })
        }
        Value::Table(table) => {
            if !matches!(field(table, "err"), Value::String(_))
                && !matches!(field(table, "ok"), Value::String(_))
            {
                match field(table, "double") {
                    Value::Number(n) => {
                        out.extend_from_slice(b",");
                        out.extend_from_slice(double_text(n).as_bytes());
                        out.extend_from_slice(b"\r\n");
                        return;
                    }
                    Value::Integer(n) => {
                        out.extend_from_slice(format!(",{n}\r\n").as_bytes());
                        return;
                    }
                    _ => {}
                }
                if let Value::String(big) = field(table, "big_number") {
                    out.extend_from_slice(b"(");
                    out.extend_from_slice(&big.as_bytes());
                    out.extend_from_slice(b"\r\n");
                    return;
                }
                if let Value::Table(inner) = field(table, "verbatim_string") {
                    if let (Value::String(format), Value::String(text)) =
                        (field(&inner, "format"), field(&inner, "string"))
                    {
                        let (format, text) = (format.as_bytes(), text.as_bytes());
                        header(out, b'=', text.len() + 4);
                        out.extend_from_slice(&format[..format.len().min(3)]);
                        out.extend_from_slice(b":");
                        out.extend_from_slice(&text);
                        out.extend_from_slice(b"\r\n");
                        return;
                    }
                }
                // Two passes (count, then write): holding every value at once would take a
                // Lua stack slot each.
                if let Value::Table(map) = field(table, "map") {
                    header(out, b'%', map.clone().pairs::<Value, Value>().count());
                    for (key, value) in map.pairs::<Value, Value>().filter_map(Result::ok) {
                        lua_to_resp3(&key, depth + 1, mode, out);
                        lua_to_resp3(&value, depth + 1, mode, out);
                    }
                    return;
                }
                if let Value::Table(set) = field(table, "set") {
                    header(out, b'~', set.clone().pairs::<Value, Value>().count());
                    for (key, _) in set.pairs::<Value, Value>().filter_map(Result::ok) {
                        lua_to_resp3(&key, depth + 1, mode, out);
                    }
                    return;
                }
                let len = (1..)
                    .take_while(|&i| !matches!(table.raw_get::<Value>(i), Ok(Value::Nil) | Err(_)))
                    .count();
                header(out, b'*', len);
                for i in 1..=len {
                    let item = table.raw_get::<Value>(i).unwrap_or(Value::Nil);
                    lua_to_resp3(&item, depth + 1, mode, out);
                }
                return;
            }
            crate::session::resp3::encode(&table_to_reply(table, depth, mode), &Shape::Plain, out);
        }
        other => {
            crate::session::resp3::encode(&lua_to_reply(other, depth, mode), &Shape::Plain, out)
        }
    }
}

/// A double as Redis's RESP2 `addReplyDouble` writes it (`%.17g`).
pub fn double_text(n: f64) -> String {
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    if n.is_nan() {
        return "nan".into();
    }
    String::from_utf8_lossy(&crate::store::format_double(n)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_shortest() {
        assert_eq!(number_text(9007199254740991.0), "9007199254740991");
        assert_eq!(number_text(1.5), "1.5");
        assert_eq!(number_text(-3.0), "-3");
        assert_eq!(number_text(0.1), "0.1");
    }

    #[test]
    fn lua_values_become_replies() {
        let lua = Lua::new();
        let value: Value = lua
            .load("return {1, 'two', true, false, {ok='fine'}, {err='ERR bad'}, 3.9, nil, 5}")
            .eval()
            .unwrap();
        assert_eq!(
            lua_to_reply(&value, 0, ReplyMode::Resp2),
            Reply::Array(vec![
                Reply::Integer(1),
                Reply::Bulk(Bytes::from_static(b"two")),
                Reply::Integer(1),
                Reply::NullBulk,
                Reply::simple("fine"),
                Reply::error("ERR bad"),
                Reply::Integer(3),
            ])
        );
    }

    #[test]
    fn replies_become_lua_values() {
        let lua = Lua::new();
        let reply = Reply::Array(vec![
            Reply::Integer(7),
            Reply::NullBulk,
            Reply::error("WRONGTYPE no"),
        ]);
        let value = reply_to_lua(&lua, &reply, &Shape::Plain, ReplyMode::Resp2).unwrap();
        let Value::Table(table) = value else { panic!() };
        assert_eq!(table.raw_get::<f64>(1).unwrap(), 7.0);
        assert!(!table.raw_get::<bool>(2).unwrap());
        let err: Table = table.raw_get(3).unwrap();
        assert_eq!(err.raw_get::<String>("err").unwrap(), "WRONGTYPE no");
    }

    #[test]
    fn a_pcall_error_returned_as_is_is_counted_already_one_made_by_the_script_is_not() {
        let lua = Lua::new();
        let marked: Value = lua
            .load("return {err='OOM no', ignore_error_stats_update=true}")
            .eval()
            .unwrap();
        let reply = script_reply(&marked, ReplyMode::Resp2);
        assert_eq!(
            reply.as_counted_error().map(|t| &t[..]),
            Some(&b"OOM no"[..])
        );
        assert!(reply.is_error());
        let mut wire = bytes::BytesMut::new();
        reply.encode(&mut wire);
        assert_eq!(&wire[..], b"-OOM no\r\n", "the same bytes as any error");
        let own: Value = lua.load("return {err='ERR mine'}").eval().unwrap();
        let reply = script_reply(&own, ReplyMode::Resp2);
        assert_eq!(reply, Reply::error("ERR mine"));
        assert_eq!(reply.as_counted_error(), None);
    }
}
