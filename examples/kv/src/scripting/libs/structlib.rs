//! Roberto Ierusalimschy's `struct` library (0.2, as Redis links it): `struct.pack(fmt,
//! ...)`, `struct.unpack(fmt, s [, pos])`, `struct.size(fmt)`. Formats: `<` `>` `=` byte
//! order, `!n` alignment, `x` padding, `b B h H l L T` integers of their C sizes, `i I`
//! with an optional size, `f d` floats, `c n` fixed strings (`c0`: the length is the previous
//! value), `s` zero-terminated strings.

use bytes::BufMut;
use mlua::{Lua, MultiValue, Table, Value};

use super::number_arg;

#[derive(Clone, Copy)]
struct State {
    little: bool,
    align: usize,
}

fn err(text: &str) -> mlua::Error {
    mlua::Error::RuntimeError(text.into())
}

/// One format item: its letter and size.
fn items(fmt: &[u8]) -> mlua::Result<Vec<(u8, usize)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        i += 1;
        let start = i;
        while i < fmt.len() && fmt[i].is_ascii_digit() {
            i += 1;
        }
        let n: Option<usize> = std::str::from_utf8(&fmt[start..i])
            .ok()
            .and_then(|s| s.parse().ok());
        let size = match c {
            b'x' | b'b' | b'B' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b'i' | b'I' => {
                let n = n.unwrap_or(4);
                if !(1..=8).contains(&n) {
                    return Err(err(&format!("integral size {n} is larger than limit of 8")));
                }
                n
            }
            b'c' => n.unwrap_or(1),
            b's' => 0,
            b'!' => n.unwrap_or(8),
            b'<' | b'>' | b'=' | b' ' => 0,
            other => return Err(err(&format!("invalid format option '{}'", other as char))),
        };
        out.push((c, size));
    }
    Ok(out)
}

fn padding(state: &State, size: usize, len: usize) -> usize {
    let align = size.min(state.align);
    if align <= 1 || !align.is_power_of_two() {
        return 0;
    }
    (align - (len & (align - 1))) & (align - 1)
}

pub(super) fn table(lua: &Lua) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.raw_set("pack", lua.create_function(pack)?)?;
    table.raw_set("unpack", lua.create_function(unpack)?)?;
    table.raw_set(
        "size",
        lua.create_function(|_, fmt: mlua::LuaString| {
            let mut state = State {
                little: true,
                align: 1,
            };
            let mut len = 0usize;
            for (c, size) in items(&fmt.as_bytes())? {
                match c {
                    b'<' => state.little = true,
                    b'>' => state.little = false,
                    b'=' => state.little = cfg!(target_endian = "little"),
                    b'!' => state.align = size,
                    b's' | b'c' if size == 0 => {
                        return Err(err("options 'c0' - 's' have undefined sizes"))
                    }
                    b' ' => {}
                    _ => {
                        len += padding(&state, size, len) + size;
                    }
                }
            }
            Ok(len as f64)
        })?,
    )?;
    Ok(table)
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    let Some(Value::String(fmt)) = args.front() else {
        return Err(err("bad argument #1 to 'pack' (string expected)"));
    };
    let fmt = fmt.as_bytes().to_vec();
    let mut state = State {
        little: true,
        align: 1,
    };
    let mut out: Vec<u8> = Vec::new();
    let mut arg = 1;
    for (c, size) in items(&fmt)? {
        match c {
            b'<' => state.little = true,
            b'>' => state.little = false,
            b'=' => state.little = cfg!(target_endian = "little"),
            b'!' => state.align = size,
            b' ' => {}
            b'x' => out.push(0),
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let pad = padding(&state, size, out.len());
                out.extend(std::iter::repeat_n(0, pad));
                let n = number_arg(args.get(arg).unwrap_or(&Value::Nil), arg + 1, "pack")?;
                arg += 1;
                let v = n as i64 as u64;
                let bytes = v.to_le_bytes();
                if state.little {
                    out.extend_from_slice(&bytes[..size]);
                } else {
                    out.extend(bytes[..size].iter().rev());
                }
            }
            b'f' | b'd' => {
                let pad = padding(&state, size, out.len());
                out.extend(std::iter::repeat_n(0, pad));
                let n = number_arg(args.get(arg).unwrap_or(&Value::Nil), arg + 1, "pack")?;
                arg += 1;
                let bytes = if c == b'f' {
                    (n as f32).to_le_bytes().to_vec()
                } else {
                    n.to_le_bytes().to_vec()
                };
                if state.little {
                    out.extend_from_slice(&bytes);
                } else {
                    out.extend(bytes.iter().rev());
                }
            }
            b'c' | b's' => {
                let Some(Value::String(s)) = args.get(arg) else {
                    return Err(err(&format!(
                        "bad argument #{} to 'pack' (string expected)",
                        arg + 1
                    )));
                };
                arg += 1;
                let s = s.as_bytes();
                if c == b's' {
                    out.extend_from_slice(&s);
                    out.push(0);
                } else {
                    let n = if size == 0 { s.len() } else { size };
                    if s.len() < n {
                        return Err(err(&format!(
                            "bad argument #{arg} to 'pack' (string too short)"
                        )));
                    }
                    out.put_slice(&s[..n]);
                }
            }
            _ => {}
        }
    }
    lua.create_string(&out)
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let (Some(Value::String(fmt)), Some(Value::String(data))) = (args.front(), args.get(1)) else {
        return Err(err("bad argument to 'unpack' (string expected)"));
    };
    let fmt = fmt.as_bytes().to_vec();
    let data = data.as_bytes().to_vec();
    let mut pos = match args.get(2) {
        Some(Value::Nil) | None => 0,
        Some(v) => (number_arg(v, 3, "unpack")? as usize).saturating_sub(1),
    };
    let mut state = State {
        little: true,
        align: 1,
    };
    let mut out = MultiValue::new();
    let mut last_number: Option<usize> = None;
    for (c, size) in items(&fmt)? {
        let need = |pos: usize, n: usize| -> mlua::Result<()> {
            if pos + n > data.len() {
                Err(err("bad argument #2 to 'unpack' (data string too short)"))
            } else {
                Ok(())
            }
        };
        match c {
            b'<' => state.little = true,
            b'>' => state.little = false,
            b'=' => state.little = cfg!(target_endian = "little"),
            b'!' => state.align = size,
            b' ' => {}
            b'x' => pos += 1,
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                pos += padding(&state, size, pos);
                need(pos, size)?;
                let mut bytes = [0u8; 8];
                let chunk = &data[pos..pos + size];
                if state.little {
                    bytes[..size].copy_from_slice(chunk);
                } else {
                    for (i, b) in chunk.iter().rev().enumerate() {
                        bytes[i] = *b;
                    }
                }
                let raw = u64::from_le_bytes(bytes);
                let signed = matches!(c, b'b' | b'h' | b'l' | b'i');
                let value = if signed && size < 8 {
                    let shift = 64 - 8 * size as u32;
                    (((raw << shift) as i64) >> shift) as f64
                } else if signed {
                    raw as i64 as f64
                } else {
                    raw as f64
                };
                last_number = Some(value as usize);
                out.push_back(Value::Number(value));
                pos += size;
            }
            b'f' | b'd' => {
                pos += padding(&state, size, pos);
                need(pos, size)?;
                let mut chunk = data[pos..pos + size].to_vec();
                if !state.little {
                    chunk.reverse();
                }
                let value = if c == b'f' {
                    f64::from(f32::from_le_bytes(chunk[..4].try_into().unwrap_or([0; 4])))
                } else {
                    f64::from_le_bytes(chunk[..8].try_into().unwrap_or([0; 8]))
                };
                out.push_back(Value::Number(value));
                pos += size;
            }
            b'c' => {
                let n = if size == 0 {
                    last_number
                        .take()
                        .ok_or_else(|| err("format 'c0' needs a previous size"))?
                } else {
                    size
                };
                need(pos, n)?;
                out.push_back(Value::String(lua.create_string(&data[pos..pos + n])?));
                pos += n;
            }
            b's' => {
                let end = data[pos.min(data.len())..]
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| err("unfinished string in data"))?;
                out.push_back(Value::String(lua.create_string(&data[pos..pos + end])?));
                pos += end + 1;
            }
            _ => {}
        }
    }
    out.push_back(Value::Number((pos + 1) as f64));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_unpacks() {
        let lua = Lua::new();
        lua.globals().set("struct", table(&lua).unwrap()).unwrap();
        let got: String = lua
            .load(
                "local s = struct.pack('>i2Bs', 258, 7, 'hi')
                 local a, b, c, next = struct.unpack('>i2Bs', s)
                 return #s .. ' ' .. a .. ' ' .. b .. ' ' .. c .. ' ' .. next .. ' ' .. struct.size('<iI2d')",
            )
            .eval()
            .unwrap();
        assert_eq!(got, "6 258 7 hi 7 14");
    }
}
