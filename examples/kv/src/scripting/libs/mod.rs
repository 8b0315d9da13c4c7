//! The C libraries Redis links into its Lua, written on mlua's API (mlua ships none of them):
//! `bit` (LuaBitOp), `struct` (Roberto Ierusalimschy's struct), `cjson` (lua-cjson with
//! Redis's settings) and `cmsgpack` (lua-cmsgpack), each with the behaviour and error texts
//! Redis's scripts see.

mod bit;
mod cjson;
mod cmsgpack;
mod structlib;

use mlua::{Lua, Value};

/// Installs the four libraries as globals of `lua`.
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    globals.raw_set("bit", bit::table(lua)?)?;
    globals.raw_set("struct", structlib::table(lua)?)?;
    globals.raw_set("cjson", cjson::table(lua)?)?;
    globals.raw_set("cmsgpack", cmsgpack::table(lua)?)?;
    Ok(())
}

/// A Lua number argument as f64 (numbers and numeric strings, as `luaL_checknumber`).
pub(crate) fn number_arg(value: &Value, position: usize, function: &str) -> mlua::Result<f64> {
    match value {
        Value::Integer(n) => Ok(*n as f64),
        Value::Number(n) => Ok(*n),
        Value::String(s) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .ok_or_else(|| bad_argument(position, function, "number expected, got string")),
        other => Err(bad_argument(
            position,
            function,
            &format!("number expected, got {}", type_name(other)),
        )),
    }
}

pub(crate) fn bad_argument(position: usize, function: &str, why: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("bad argument #{position} to '{function}' ({why})"))
}

pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Nil => "no value",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        Value::UserData(_) | Value::LightUserData(_) => "userdata",
        _ => "value",
    }
}

/// C's `%.<precision>g` (what Lua's `tostring` and lua-cjson use for numbers).
pub(crate) fn format_g(value: f64, precision: usize) -> String {
    if value.is_nan() {
        return if value.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.into();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let precision = precision.max(1);
    let sci = format!("{:.*e}", precision - 1, value);
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if exponent < -4 || exponent >= precision as i32 {
        let mantissa = trim_fraction(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    } else {
        let decimals = (precision as i32 - 1 - exponent).max(0) as usize;
        trim_fraction(&format!("{value:.decimals$}")).to_string()
    }
}

fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::format_g;

    #[test]
    fn format_g_matches_c() {
        assert_eq!(format_g(100.0, 14), "100");
        assert_eq!(format_g(0.0003, 14), "0.0003");
        assert_eq!(format_g(1023.2, 14), "1023.2");
        assert_eq!(format_g(-5e3, 14), "-5000");
        assert_eq!(format_g(1e20, 14), "1e+20");
        assert_eq!(format_g(1.5e-7, 14), "1.5e-07");
        assert_eq!(format_g(0.1, 17), "0.10000000000000001");
        assert_eq!(format_g(123456789012345678.0, 14), "1.2345678901235e+17");
    }
}
