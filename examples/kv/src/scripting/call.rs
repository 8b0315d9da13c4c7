//! The values that cross into and out of a script: `redis.call`'s arguments read straight
//! off the Lua stack, the common replies pushed straight onto it, and a run's KEYS and ARGV
//! tables built on the stack.
//!
//! mlua's generic conversions make a handle (a slot on its reference thread) for every Lua
//! string an argument list or a returned value holds, and free it after; a script calling
//! `redis.call` in a loop paid that per argument and per reply. Here each argument string is
//! copied once into the command, as Redis copies it into the command's argument vector, and a
//! bulk reply is copied once into a Lua string.
//!
//! Why `unsafe`: mlua exposes reading its callback's arguments off the stack and pushing its
//! results only through its unsafe conversion hooks (`from_stack_args`,
//! `push_into_stack_multi`) and the raw `lua_*` functions; the blocks below use only calls
//! that cannot raise a Lua error here.

#![allow(unsafe_code)]

use std::os::raw::c_int;

use bytes::Bytes;
use mlua::state::RawLua;
use mlua::{ffi, FromLuaMulti, IntoLua, IntoLuaMulti, Lua, MultiValue, Value};

/// Redis's error for an argument that is neither a string nor a number.
pub const BAD_ARGUMENT: &str = "Lua redis lib command arguments must be strings or integers";

/// `redis.call`'s arguments as the command's words, or [`BAD_ARGUMENT`].
pub struct CallArgs(pub Result<Vec<Bytes>, &'static str>);

/// One argument value as a command word: a string's bytes, a number as Redis writes it.
pub fn arg_word(value: &Value) -> Option<Bytes> {
    match value {
        Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(n) => Some(Bytes::from(n.to_string())),
        Value::Number(n) => Some(number_word(*n)),
        _ => None,
    }
}

/// A Lua 5.1 number as a command word: an integral one in `i64`'s range as an integer (as
/// mlua reads such a number, and [`arg_word`] writes it), any other as Redis writes numbers.
fn number_word(n: f64) -> Bytes {
    // -2^63 ..= 2^63 exclusive of the top: the integers an f64 holds exactly in an i64.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    let integral = (-LIMIT..LIMIT).contains(&n) && (n as i64) as f64 == n;
    // -0.0 compares equal to 0 but is not the integer 0 by bits (mlua reads it as a number).
    if integral && n.to_bits() == ((n as i64) as f64).to_bits() {
        Bytes::from((n as i64).to_string())
    } else {
        Bytes::from(super::convert::number_text(n))
    }
}

impl FromLuaMulti for CallArgs {
    fn from_lua_multi(values: MultiValue, _lua: &Lua) -> mlua::Result<Self> {
        let words: Option<Vec<Bytes>> = values.iter().map(arg_word).collect();
        Ok(CallArgs(words.ok_or(BAD_ARGUMENT)))
    }

    unsafe fn from_stack_args(
        nargs: c_int,
        _i: usize,
        _to: Option<&str>,
        lua: &RawLua,
    ) -> mlua::Result<Self> {
        let state = lua.state();
        // The thread's request vector (a command keeping its words as single values leaves it
        // to be handed back after the call), as the session parses a request into it.
        let mut words = crate::command::argv::take();
        words.reserve(nargs.max(0) as usize);
        for idx in -nargs..0 {
            // SAFETY: the callback's `nargs` arguments are the top `nargs` slots of `state`'s
            // stack (mlua calls this before it touches the stack), so `idx` names a live slot.
            // Only `lua_type`, `lua_tolstring` on a string (no conversion, so no allocation
            // and no Lua error) and `lua_tonumber` are called: none raises or changes the stack.
            // The slice is copied before the next call and the string stays on the stack
            // (referenced, so not collected) while it is read.
            let word = unsafe {
                match ffi::lua_type(state, idx) {
                    ffi::LUA_TSTRING => {
                        let mut len = 0;
                        let data = ffi::lua_tolstring(state, idx, &mut len);
                        Bytes::copy_from_slice(std::slice::from_raw_parts(data.cast::<u8>(), len))
                    }
                    ffi::LUA_TNUMBER => number_word(ffi::lua_tonumber(state, idx)),
                    _ => return Ok(CallArgs(Err(BAD_ARGUMENT))),
                }
            };
            words.push(word);
        }
        Ok(CallArgs(Ok(words)))
    }
}

/// What `redis.call` returns: a converted value, or a bulk reply's bytes, made a Lua string
/// only when pushed as the call's result.
pub enum CallReply {
    Value(Value),
    Bulk(Bytes),
}

impl CallReply {
    /// A bulk reply's bytes: pushed as they are when shorter than 1 GiB (longer strings
    /// take mlua's protected path).
    pub fn bulk(lua: &Lua, bytes: &Bytes) -> mlua::Result<CallReply> {
        if bytes.len() < 1 << 30 {
            Ok(CallReply::Bulk(bytes.clone()))
        } else {
            Ok(CallReply::Value(Value::String(lua.create_string(bytes)?)))
        }
    }
}

impl IntoLuaMulti for CallReply {
    fn into_lua_multi(self, lua: &Lua) -> mlua::Result<MultiValue> {
        match self {
            CallReply::Value(value) => value.into_lua_multi(lua),
            CallReply::Bulk(bytes) => Value::String(lua.create_string(&bytes)?).into_lua_multi(lua),
        }
    }

    unsafe fn push_into_stack_multi(self, lua: &RawLua) -> mlua::Result<c_int> {
        match self {
            // SAFETY: as mlua's own `IntoLuaMulti for Value` (the caller's contract: a slot
            // checked free on `lua`'s stack).
            CallReply::Value(value) => unsafe { value.push_into_stack_multi(lua) },
            CallReply::Bulk(bytes) => {
                // SAFETY: mlua checked a free stack slot for the callback's result. The states
                // here set no Lua memory limit, so mlua's allocator aborts rather than failing
                // (mlua pushes a `&str` unprotected then too), and a collection step the push
                // runs calls no script code (the sandbox has no `newproxy`, and Lua 5.1 runs no
                // `__gc` of a table): the push cannot raise a Lua error across this frame.
                // `Bulk` holds less than 1 GiB (see [`CallReply::bulk`]), below which mlua
                // pushes unprotected as well.
                unsafe { ffi::lua_pushlstring(lua.state(), bytes.as_ptr().cast(), bytes.len()) };
                Ok(1)
            }
        }
    }
}

/// A run's KEYS or ARGV: a new table of strings (Redis makes them per call too), built on
/// the stack where it is passed or stored, without a handle per string or for the table.
/// Only for words under 1 GiB each ([`Words::fit`]): longer ones take mlua's protected path.
pub struct Words<'a>(&'a [Bytes]);

impl<'a> Words<'a> {
    /// `words` if each is short enough to be pushed unprotected.
    pub fn fit(words: &'a [Bytes]) -> Option<Words<'a>> {
        words
            .iter()
            .all(|word| word.len() < 1 << 30)
            .then_some(Words(words))
    }

    /// The table through mlua's handles, for words of any length.
    pub fn table(lua: &Lua, words: &[Bytes]) -> mlua::Result<Value> {
        let table = lua.create_table_with_capacity(words.len(), 0)?;
        for (i, word) in words.iter().enumerate() {
            table.raw_set(i + 1, lua.create_string(word)?)?;
        }
        Ok(Value::Table(table))
    }
}

impl IntoLua for Words<'_> {
    fn into_lua(self, lua: &Lua) -> mlua::Result<Value> {
        Words::table(lua, self.0)
    }

    unsafe fn push_into_stack(self, lua: &RawLua) -> mlua::Result<()> {
        let state = lua.state();
        let len = c_int::try_from(self.0.len())
            .map_err(|_| mlua::Error::RuntimeError("too many script arguments".into()))?;
        // SAFETY: two free slots are made sure of first (the table and one string at a time).
        // As in `CallReply`'s push: no Lua memory limit is set on these states and no script
        // code runs in a collection step, so the allocations cannot raise a Lua error, and
        // every word is under 1 GiB ([`Words::fit`]).
        // `lua_rawseti` on the new table (index -2) with an integer key cannot fail otherwise.
        unsafe {
            if ffi::lua_checkstack(state, 2) == 0 {
                return Err(mlua::Error::StackError);
            }
            ffi::lua_createtable(state, len, 0);
            for (i, word) in (1..).zip(self.0.iter()) {
                ffi::lua_pushlstring(state, word.as_ptr().cast(), word.len());
                ffi::lua_rawseti(state, -2, i);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A number argument reads as mlua's `Value` for it would make it (integral ones within
    /// `i64` as integers, others as Redis writes numbers).
    #[test]
    fn number_words_match_the_value_path() {
        for n in [
            0.0,
            -0.0,
            3.0,
            -7.0,
            1.5,
            1e20,
            -1e-7,
            9_223_372_036_854_775_808.0,
            f64::NAN,
        ] {
            let integral = n == n.trunc() && n.abs() < 9_223_372_036_854_775_808.0;
            let value = if integral && n.to_bits() == ((n as i64) as f64).to_bits() {
                Value::Integer(n as i64)
            } else {
                Value::Number(n)
            };
            assert_eq!(arg_word(&value), Some(number_word(n)), "{n}");
        }
        assert_eq!(number_word(3.0), Bytes::from_static(b"3"));
        assert_eq!(number_word(1.5), Bytes::from_static(b"1.5"));
    }

    /// Through a real callback: strings and numbers become words, anything else the error.
    #[test]
    fn arguments_are_read_off_the_stack() {
        let lua = Lua::new();
        let f = lua
            .create_function(|_, args: CallArgs| {
                Ok(match args.0 {
                    Ok(words) => words
                        .iter()
                        .map(|w| String::from_utf8_lossy(w).into_owned())
                        .collect::<Vec<_>>()
                        .join("|"),
                    Err(text) => text.to_string(),
                })
            })
            .unwrap();
        lua.globals().set("f", f).unwrap();
        let run = |code: &str| lua.load(code).eval::<String>().unwrap();
        assert_eq!(run("return f('set', 'k', 12, 2.5, -0)"), "set|k|12|2.5|0");
        assert_eq!(run("return f()"), "");
        assert_eq!(run("return f('get', {})"), BAD_ARGUMENT);
        assert_eq!(run("return f('get', nil)"), BAD_ARGUMENT);
    }
}
