//! lua-cmsgpack 0.4 as Redis links it: `cmsgpack.pack(...)`, `cmsgpack.unpack(s)`,
//! `cmsgpack.unpack_one(s [, offset])`, `cmsgpack.unpack_limit(s, limit [, offset])`. Whole
//! numbers pack as the smallest integer type, others as float 32 when exact else float 64;
//! a table whose keys are 1..n packs as an array, any other as a map (in `next` order);
//! nesting past 16 tables packs nil, as lua-cmsgpack does.

use mlua::{Lua, MultiValue, Table, Value};

const MAX_NESTING: usize = 16;

fn err(text: &str) -> mlua::Error {
    mlua::Error::RuntimeError(text.into())
}

pub(super) fn table(lua: &Lua) -> mlua::Result<Table> {
    let cmsgpack = lua.create_table()?;
    cmsgpack.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(err("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for value in args.iter() {
                pack(value, 0, &mut out)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    cmsgpack.raw_set(
        "unpack",
        lua.create_function(|lua, data: mlua::LuaString| {
            let bytes = data.as_bytes();
            let (_, values) = unpack_full(lua, &bytes, 0, 0)?;
            Ok(MultiValue::from_vec(values))
        })?,
    )?;
    cmsgpack.raw_set(
        "unpack_one",
        lua.create_function(|lua, (data, offset): (mlua::LuaString, Option<f64>)| {
            let bytes = data.as_bytes();
            let (next, values) = unpack_full(lua, &bytes, 1, offset.unwrap_or(0.0) as usize)?;
            let mut out = vec![Value::Number(next)];
            out.extend(values);
            Ok(MultiValue::from_vec(out))
        })?,
    )?;
    cmsgpack.raw_set(
        "unpack_limit",
        lua.create_function(
            |lua, (data, limit, offset): (mlua::LuaString, f64, Option<f64>)| {
                let bytes = data.as_bytes();
                let (next, values) =
                    unpack_full(lua, &bytes, limit as usize, offset.unwrap_or(0.0) as usize)?;
                let mut out = vec![Value::Number(next)];
                out.extend(values);
                Ok(MultiValue::from_vec(out))
            },
        )?,
    )?;
    cmsgpack.raw_set("_NAME", "cmsgpack")?;
    cmsgpack.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    Ok(cmsgpack)
}

fn pack_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        let u = n as u64;
        if u < 128 {
            out.push(u as u8);
        } else if u <= 0xff {
            out.extend_from_slice(&[0xcc, u as u8]);
        } else if u <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(u as u16).to_be_bytes());
        } else if u <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(u as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&u.to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_number(n: f64, out: &mut Vec<u8>) {
    if n.is_finite()
        && n == n.trunc()
        && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n)
    {
        pack_int(n as i64, out);
    } else if (n as f32) as f64 == n || n.is_nan() {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_len(len: usize, small: u8, small_max: usize, codes: [u8; 2], out: &mut Vec<u8>) {
    if len <= small_max {
        out.push(small | len as u8);
    } else if len <= 0xffff {
        out.push(codes[0]);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(codes[1]);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// lua-cmsgpack's `table_is_an_array`: every key a positive integer, no holes.
fn array_len(table: &Table) -> mlua::Result<Option<usize>> {
    let mut count = 0usize;
    let mut max = 0usize;
    for pair in table.clone().pairs::<Value, Value>() {
        let (key, _) = pair?;
        let index = match key {
            Value::Integer(n) if n >= 1 => n as usize,
            Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => n as usize,
            _ => return Ok(None),
        };
        count += 1;
        max = max.max(index);
    }
    Ok((max == count).then_some(count))
}

fn pack(value: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match value {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(n) => pack_int(*n, out),
        Value::Number(n) => pack_number(*n, out),
        Value::String(s) => {
            let bytes = s.as_bytes();
            let len = bytes.len();
            if len < 32 {
                out.push(0xa0 | len as u8);
            } else if len <= 0xff {
                out.extend_from_slice(&[0xd9, len as u8]);
            } else if len <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(len as u32).to_be_bytes());
            }
            out.extend_from_slice(&bytes);
        }
        Value::Table(table) if level < MAX_NESTING => match array_len(table)? {
            Some(len) => {
                pack_len(len, 0x90, 15, [0xdc, 0xdd], out);
                for i in 1..=len {
                    pack(&table.raw_get::<Value>(i)?, level + 1, out)?;
                }
            }
            None => {
                // Two passes (count, then pack): holding every key and value at once would
                // take a Lua stack slot each.
                let len = table.clone().pairs::<Value, Value>().count();
                pack_len(len, 0x80, 15, [0xde, 0xdf], out);
                for pair in table.clone().pairs::<Value, Value>() {
                    let (key, value) = pair?;
                    pack(&key, level + 1, out)?;
                    pack(&value, level + 1, out)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

/// Decodes up to `limit` objects (0: all) from `offset`; the offset after them, or -1 when
/// the input is used up.
fn unpack_full(
    lua: &Lua,
    data: &[u8],
    limit: usize,
    offset: usize,
) -> mlua::Result<(f64, Vec<Value>)> {
    if offset > data.len() {
        return Err(err("Start offset greater than input length."));
    }
    let mut cursor = Cursor { data, pos: offset };
    let mut values = Vec::new();
    while cursor.pos < data.len() && (limit == 0 || values.len() < limit) {
        values.push(cursor.value(lua)?);
    }
    let next = if cursor.pos >= data.len() {
        -1.0
    } else {
        cursor.pos as f64
    };
    Ok((next, values))
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.data.len());
        let end = end.ok_or_else(|| err("Missing bytes in input."))?;
        let bytes = &self.data[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn uint(&mut self, n: usize) -> mlua::Result<u64> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let tag = self.take(1)?[0];
        Ok(match tag {
            0x00..=0x7f => Value::Number(f64::from(tag)),
            0xe0..=0xff => Value::Number(f64::from(tag as i8)),
            0x80..=0x8f => self.map(lua, usize::from(tag & 0x0f))?,
            0x90..=0x9f => self.array(lua, usize::from(tag & 0x0f))?,
            0xa0..=0xbf => self.string(lua, usize::from(tag & 0x1f))?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xc4 | 0xd9 => {
                let n = self.uint(1)? as usize;
                self.string(lua, n)?
            }
            0xc5 | 0xda => {
                let n = self.uint(2)? as usize;
                self.string(lua, n)?
            }
            0xc6 | 0xdb => {
                let n = self.uint(4)? as usize;
                self.string(lua, n)?
            }
            0xca => {
                let bits = self.uint(4)? as u32;
                Value::Number(f64::from(f32::from_bits(bits)))
            }
            0xcb => Value::Number(f64::from_bits(self.uint(8)?)),
            0xcc => Value::Number(self.uint(1)? as f64),
            0xcd => Value::Number(self.uint(2)? as f64),
            0xce => Value::Number(self.uint(4)? as f64),
            0xcf => Value::Number(self.uint(8)? as f64),
            0xd0 => Value::Number(f64::from(self.uint(1)? as u8 as i8)),
            0xd1 => Value::Number(f64::from(self.uint(2)? as u16 as i16)),
            0xd2 => Value::Number(f64::from(self.uint(4)? as u32 as i32)),
            0xd3 => Value::Number(self.uint(8)? as i64 as f64),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(lua, n)?
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(lua, n)?
            }
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n)?
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n)?
            }
            _ => return Err(err("Bad data format in input.")),
        })
    }

    fn string(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let bytes = self.take(n)?.to_vec();
        Ok(Value::String(lua.create_string(&bytes)?))
    }

    fn array(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let table = lua.create_table()?;
        for i in 1..=n {
            let value = self.value(lua)?;
            table.raw_set(i, value)?;
        }
        Ok(Value::Table(table))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let table = lua.create_table()?;
        for _ in 0..n {
            let key = self.value(lua)?;
            let value = self.value(lua)?;
            if key != Value::Nil {
                table.raw_set(key, value)?;
            }
        }
        Ok(Value::Table(table))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(lua: &Lua, expr: &str) -> String {
        let packed: mlua::LuaString = lua
            .load(format!("return cmsgpack.pack({expr})"))
            .eval()
            .unwrap();
        packed
            .as_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn packs_as_lua_cmsgpack() {
        let lua = Lua::new();
        lua.globals().set("cmsgpack", table(&lua).unwrap()).unwrap();
        assert_eq!(hex(&lua, "0.1"), "cb3fb999999999999a");
        assert_eq!(hex(&lua, "-1099511627776"), "d3ffffff0000000000");
        assert_eq!(hex(&lua, "{1, 2}"), "920102");
        let round: String = lua
            .load(
                "local s = cmsgpack.pack({a = 1, b = {1, 'x', true}}, 'tail')
                 local t, tail = cmsgpack.unpack(s)
                 local off, one = cmsgpack.unpack_one(s, 0)
                 return t.a .. t.b[2] .. tostring(t.b[3]) .. tail .. off .. tostring(one.a)",
            )
            .eval()
            .unwrap();
        assert!(round.starts_with("1xtruetail"), "{round}");
    }
}
