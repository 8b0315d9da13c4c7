//! lua-cjson 2.1 as Redis links it: `cjson.encode`, `cjson.decode`, `cjson.null` and the
//! settings (`encode_max_depth`, `decode_max_depth`, `encode_invalid_numbers`,
//! `decode_invalid_numbers`, `encode_number_precision`, `encode_sparse_array`,
//! `encode_keep_buffer`), with lua-cjson's output (numbers as `%.14g`, `/` escaped, an
//! empty table as `{}`, sparse arrays refused) and its error texts.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::{format_g, type_name};

struct Config {
    encode_max_depth: Cell<usize>,
    decode_max_depth: Cell<usize>,
    /// 0: refuse NaN/Inf; 1: write them; 2: write `null`.
    encode_invalid_numbers: Cell<u8>,
    decode_invalid_numbers: Cell<bool>,
    precision: Cell<usize>,
    sparse_convert: Cell<bool>,
    sparse_ratio: Cell<usize>,
    sparse_safe: Cell<usize>,
    keep_buffer: Cell<bool>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            encode_max_depth: Cell::new(1000),
            decode_max_depth: Cell::new(1000),
            encode_invalid_numbers: Cell::new(0),
            decode_invalid_numbers: Cell::new(true),
            precision: Cell::new(14),
            sparse_convert: Cell::new(false),
            sparse_ratio: Cell::new(2),
            sparse_safe: Cell::new(10),
            keep_buffer: Cell::new(true),
        }
    }
}

fn err(text: String) -> mlua::Error {
    mlua::Error::RuntimeError(text)
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn int_arg(args: &MultiValue, i: usize) -> Option<usize> {
    match args.get(i) {
        Some(Value::Integer(n)) => Some(*n as usize),
        Some(Value::Number(n)) => Some(*n as usize),
        _ => None,
    }
}

fn bool_arg(args: &MultiValue, i: usize) -> Option<bool> {
    match args.get(i) {
        Some(Value::Boolean(b)) => Some(*b),
        Some(Value::String(s)) => match &*s.to_string_lossy() {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn table(lua: &Lua) -> mlua::Result<Table> {
    let config = Rc::new(Config::default());
    let cjson = lua.create_table()?;
    let c = config.clone();
    cjson.raw_set(
        "encode",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(err(
                    "bad argument #1 to 'encode' (expected 1 argument)".into()
                ));
            }
            let mut out = Vec::new();
            encode(&c, &args[0], 0, &mut out)?;
            lua.create_string(&out)
        })?,
    )?;
    let c = config.clone();
    cjson.raw_set(
        "decode",
        lua.create_function(move |lua, text: Value| {
            let Value::String(text) = text else {
                return Err(err("bad argument #1 to 'decode' (string expected)".into()));
            };
            let bytes = text.as_bytes();
            let mut parser = Parser {
                lua,
                text: &bytes,
                pos: 0,
                config: &c,
                depth: 0,
            };
            parser.skip_ws();
            let value = parser.value()?;
            parser.skip_ws();
            if parser.pos < parser.text.len() {
                return Err(parser.error("the end", "trailing garbage"));
            }
            Ok(value)
        })?,
    )?;
    cjson.raw_set("null", null())?;
    cjson.raw_set("_NAME", "cjson")?;
    cjson.raw_set("_VERSION", "2.1.0")?;
    let c = config.clone();
    cjson.raw_set(
        "encode_max_depth",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(n) = int_arg(&args, 0) {
                c.encode_max_depth.set(n.max(1));
            }
            Ok(c.encode_max_depth.get() as f64)
        })?,
    )?;
    let c = config.clone();
    cjson.raw_set(
        "decode_max_depth",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(n) = int_arg(&args, 0) {
                c.decode_max_depth.set(n.max(1));
            }
            Ok(c.decode_max_depth.get() as f64)
        })?,
    )?;
    let c = config.clone();
    cjson.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, args: MultiValue| {
            match args.front() {
                Some(Value::String(s)) if &*s.to_string_lossy() == "null" => {
                    c.encode_invalid_numbers.set(2)
                }
                _ => {
                    if let Some(b) = bool_arg(&args, 0) {
                        c.encode_invalid_numbers.set(u8::from(b));
                    }
                }
            }
            Ok(match c.encode_invalid_numbers.get() {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                _ => Value::String(lua.create_string("null")?),
            })
        })?,
    )?;
    let c = config.clone();
    cjson.raw_set(
        "decode_invalid_numbers",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(b) = bool_arg(&args, 0) {
                c.decode_invalid_numbers.set(b);
            }
            Ok(c.decode_invalid_numbers.get())
        })?,
    )?;
    let c = config.clone();
    cjson.raw_set(
        "encode_number_precision",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(n) = int_arg(&args, 0) {
                if !(1..=14).contains(&n) {
                    return Err(err(
                        "bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)".into(),
                    ));
                }
                c.precision.set(n);
            }
            Ok(c.precision.get() as f64)
        })?,
    )?;
    let c = config.clone();
    cjson.raw_set(
        "encode_sparse_array",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(b) = bool_arg(&args, 0) {
                c.sparse_convert.set(b);
            }
            if let Some(n) = int_arg(&args, 1) {
                c.sparse_ratio.set(n);
            }
            if let Some(n) = int_arg(&args, 2) {
                c.sparse_safe.set(n);
            }
            Ok((
                c.sparse_convert.get(),
                c.sparse_ratio.get() as f64,
                c.sparse_safe.get() as f64,
            ))
        })?,
    )?;
    let c = config;
    cjson.raw_set(
        "encode_keep_buffer",
        lua.create_function(move |_, args: MultiValue| {
            if let Some(b) = bool_arg(&args, 0) {
                c.keep_buffer.set(b);
            }
            Ok(c.keep_buffer.get())
        })?,
    )?;
    Ok(cjson)
}

fn encode_number(config: &Config, n: f64, out: &mut Vec<u8>) -> mlua::Result<()> {
    if !n.is_finite() {
        match config.encode_invalid_numbers.get() {
            0 => return Err(err("Cannot serialise number: must not be NaN or Inf".into())),
            2 => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
            _ => {}
        }
    }
    out.extend_from_slice(format_g(n, config.precision.get()).as_bytes());
    Ok(())
}

fn encode_string(text: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in text {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b if b < 0x20 || b == 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            b => out.push(b),
        }
    }
    out.push(b'"');
}

/// lua-cjson's `lua_array_length`: the array's length, `None` for a table that is not an
/// array; excessively sparse arrays are refused unless converted to objects.
fn array_length(config: &Config, table: &Table) -> mlua::Result<Option<usize>> {
    let mut max = 0usize;
    let mut items = 0usize;
    for pair in table.clone().pairs::<Value, Value>() {
        let (key, _) = pair?;
        let index = match key {
            Value::Integer(n) if n >= 1 => n as usize,
            Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => n as usize,
            _ => return Ok(None),
        };
        max = max.max(index);
        items += 1;
    }
    let ratio = config.sparse_ratio.get();
    if ratio > 0 && max > items * ratio && max > config.sparse_safe.get() {
        if !config.sparse_convert.get() {
            return Err(err(
                "Cannot serialise table: excessively sparse array".into()
            ));
        }
        return Ok(None);
    }
    Ok(Some(max))
}

fn encode(config: &Config, value: &Value, depth: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match value {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(n) => encode_number(config, *n as f64, out)?,
        Value::Number(n) => encode_number(config, *n, out)?,
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(table) => {
            let depth = depth + 1;
            if depth > config.encode_max_depth.get() {
                return Err(err(format!(
                    "Cannot serialise, excessive nesting ({depth})"
                )));
            }
            match array_length(config, table)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        encode(config, &table.raw_get::<Value>(i)?, depth, out)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in table.clone().pairs::<Value, Value>() {
                        let (key, value) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &key {
                            Value::String(s) => encode_string(&s.as_bytes(), out),
                            Value::Integer(n) => {
                                out.push(b'"');
                                encode_number(config, *n as f64, out)?;
                                out.push(b'"');
                            }
                            Value::Number(n) => {
                                out.push(b'"');
                                encode_number(config, *n, out)?;
                                out.push(b'"');
                            }
                            _ => {
                                return Err(err(
                                    "Cannot serialise table: table key must be a number or string"
                                        .into(),
                                ))
                            }
                        }
                        out.push(b':');
                        encode(config, &value, depth, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(err(format!(
                "Cannot serialise {}: type not supported",
                type_name(other)
            )))
        }
    }
    Ok(())
}

struct Parser<'a> {
    lua: &'a Lua,
    text: &'a [u8],
    pos: usize,
    config: &'a Config,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, expected: &str, found: &str) -> mlua::Error {
        err(format!(
            "Expected {expected} but found {found} at character {}",
            self.pos + 1
        ))
    }

    fn skip_ws(&mut self) {
        while self.pos < self.text.len()
            && matches!(self.text[self.pos], b' ' | b'\t' | b'\n' | b'\r')
        {
            self.pos += 1;
        }
    }

    fn nested(&mut self) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > self.config.decode_max_depth.get() {
            return Err(err(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth,
                self.pos + 1
            )));
        }
        Ok(())
    }

    fn value(&mut self) -> mlua::Result<Value> {
        let Some(&c) = self.text.get(self.pos) else {
            return Err(self.error("value", "the end"));
        };
        match c {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => Ok(Value::String(self.lua.create_string(self.string()?)?)),
            b't' if self.text[self.pos..].starts_with(b"true") => {
                self.pos += 4;
                Ok(Value::Boolean(true))
            }
            b'f' if self.text[self.pos..].starts_with(b"false") => {
                self.pos += 5;
                Ok(Value::Boolean(false))
            }
            b'n' if self.text[self.pos..].starts_with(b"null") => {
                self.pos += 4;
                Ok(null())
            }
            b'-' | b'0'..=b'9' | b'i' | b'I' | b'n' | b'N' => self.number(),
            _ => Err(self.error("value", "invalid token")),
        }
    }

    fn number(&mut self) -> mlua::Result<Value> {
        let start = self.pos;
        while self.pos < self.text.len()
            && matches!(self.text[self.pos], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9' | b'x' | b'X' | b'a'..=b'd' | b'f' | b'A'..=b'D' | b'F' | b'i' | b'n' | b'I' | b'N' | b't' | b'y')
        {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.text[start..self.pos]).unwrap_or("");
        let lower = text.to_ascii_lowercase();
        let special = matches!(lower.trim_start_matches('-'), "inf" | "infinity" | "nan");
        if special && !self.config.decode_invalid_numbers.get() {
            self.pos = start;
            return Err(self.error("value", "invalid number"));
        }
        let parsed = if special {
            let negative = lower.starts_with('-');
            Some(match lower.trim_start_matches('-') {
                "nan" => f64::NAN,
                _ if negative => f64::NEG_INFINITY,
                _ => f64::INFINITY,
            })
        } else {
            text.parse::<f64>().ok()
        };
        match parsed {
            Some(n) => Ok(Value::Number(n)),
            None => {
                self.pos = start;
                Err(self.error("value", "invalid number"))
            }
        }
    }

    fn string(&mut self) -> mlua::Result<Vec<u8>> {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.text.get(self.pos) else {
                return Err(self.error("value", "unexpected end of string"));
            };
            self.pos += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.text.get(self.pos) else {
                        return Err(self.error("value", "invalid escape code"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut code = self.hex4()?;
                            if (0xd800..0xdc00).contains(&code)
                                && self.text[self.pos..].starts_with(b"\\u")
                            {
                                self.pos += 2;
                                let low = self.hex4()?;
                                code = 0x10000
                                    + ((code - 0xd800) << 10)
                                    + (low.wrapping_sub(0xdc00) & 0x3ff);
                            }
                            let ch = char::from_u32(code).ok_or_else(|| {
                                self.error("value", "invalid unicode escape code")
                            })?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(self.error("value", "invalid escape code")),
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn hex4(&mut self) -> mlua::Result<u32> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u32::from_str_radix(d, 16).ok())
            .ok_or_else(|| self.error("value", "invalid unicode escape code"))?;
        self.pos += 4;
        Ok(digits)
    }

    fn array(&mut self) -> mlua::Result<Value> {
        self.nested()?;
        self.pos += 1;
        let table = self.lua.create_table()?;
        self.skip_ws();
        if self.text.get(self.pos) == Some(&b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(Value::Table(table));
        }
        let mut i = 1;
        loop {
            self.skip_ws();
            let value = self.value()?;
            table.raw_set(i, value)?;
            i += 1;
            self.skip_ws();
            match self.text.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(Value::Table(table));
                }
                Some(_) => return Err(self.error("comma or array end", "invalid token")),
                None => return Err(self.error("comma or array end", "the end")),
            }
        }
    }

    fn object(&mut self) -> mlua::Result<Value> {
        self.nested()?;
        self.pos += 1;
        let table = self.lua.create_table()?;
        self.skip_ws();
        if self.text.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(Value::Table(table));
        }
        loop {
            self.skip_ws();
            if self.text.get(self.pos) != Some(&b'"') {
                return Err(self.error("object key string", "invalid token"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.text.get(self.pos) != Some(&b':') {
                return Err(self.error("colon", "invalid token"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value()?;
            table.raw_set(self.lua.create_string(&key)?, value)?;
            self.skip_ws();
            match self.text.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(Value::Table(table));
                }
                Some(_) => return Err(self.error("comma or object end", "invalid token")),
                None => return Err(self.error("comma or object end", "the end")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lua: &Lua, body: &str) -> String {
        lua.load(body).eval::<String>().unwrap()
    }

    #[test]
    fn encodes_and_decodes_as_lua_cjson() {
        let lua = Lua::new();
        lua.globals().set("cjson", table(&lua).unwrap()).unwrap();
        assert_eq!(
            run(
                &lua,
                "return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')"
            ),
            "0 -5000 -1 0.0003 1023.2 0"
        );
        assert_eq!(
            run(&lua, "return cjson.encode({1, 'a/b', true})"),
            r#"[1,"a\/b",true]"#
        );
        assert_eq!(run(&lua, "return cjson.encode({})"), "{}");
        assert_eq!(
            run(&lua, "return cjson.encode({x = cjson.null})"),
            r#"{"x":null}"#
        );
        assert_eq!(run(&lua, "return cjson.encode(0.1)"), "0.1");
        assert_eq!(run(&lua, "return cjson.decode('\"\\\\u00e9\"')"), "é");
        let failing = [
            "local t = {} t[false] = 1 return cjson.encode(t)",
            "return cjson.encode({0/0})",
            "return cjson.encode({[1]=1, [100]=2})",
            "cjson.encode_max_depth(1) return cjson.encode({{}})",
            "cjson.decode_max_depth(1) return cjson.decode('[[1]]')",
            "return cjson.decode('[1,')",
        ];
        for body in failing {
            assert!(lua.load(body).eval::<Value>().is_err(), "{body}");
        }
    }
}
