//! LuaBitOp 1.0 (`bit.*`): 32-bit operations on Lua numbers, results as signed 32-bit
//! numbers, arguments wrapped modulo 2^32 as LuaBitOp does.

use mlua::{Lua, MultiValue, Table, Value};

use super::number_arg;

/// LuaBitOp's `barg`: the number modulo 2^32, as a signed 32-bit integer.
fn to_bit(n: f64) -> i32 {
    // Adding 2^52 + 2^51 puts the integer part in the low bits of the mantissa, rounding as
    // the FPU rounds (what LuaBitOp does).
    let biased = n + 6_755_399_441_055_744.0;
    biased.to_bits() as u32 as i32
}

fn arg(args: &MultiValue, i: usize, name: &str) -> mlua::Result<i32> {
    let value = args.get(i).unwrap_or(&Value::Nil);
    Ok(to_bit(number_arg(value, i + 1, name)?))
}

fn num(n: i32) -> Value {
    Value::Number(f64::from(n))
}

pub(super) fn table(lua: &Lua) -> mlua::Result<Table> {
    let bit = lua.create_table()?;
    bit.raw_set(
        "tobit",
        lua.create_function(|_, args: MultiValue| Ok(num(arg(&args, 0, "tobit")?)))?,
    )?;
    bit.raw_set(
        "bnot",
        lua.create_function(|_, args: MultiValue| Ok(num(!arg(&args, 0, "bnot")?)))?,
    )?;
    type Fold = fn(i32, i32) -> i32;
    for (name, op) in [
        ("band", (|a, b| a & b) as Fold),
        ("bor", |a, b| a | b),
        ("bxor", |a, b| a ^ b),
    ] {
        bit.raw_set(
            name,
            lua.create_function(move |_, args: MultiValue| {
                let mut acc = arg(&args, 0, name)?;
                for i in 1..args.len() {
                    acc = op(acc, arg(&args, i, name)?);
                }
                Ok(num(acc))
            })?,
        )?;
    }
    type Shift = fn(i32, u32) -> i32;
    for (name, op) in [
        ("lshift", (|a: i32, n| ((a as u32) << n) as i32) as Shift),
        ("rshift", |a: i32, n| ((a as u32) >> n) as i32),
        ("arshift", |a: i32, n| a >> n),
        ("rol", |a: i32, n| (a as u32).rotate_left(n) as i32),
        ("ror", |a: i32, n| (a as u32).rotate_right(n) as i32),
    ] {
        bit.raw_set(
            name,
            lua.create_function(move |_, args: MultiValue| {
                let a = arg(&args, 0, name)?;
                let n = (arg(&args, 1, name)? & 31) as u32;
                Ok(num(op(a, n)))
            })?,
        )?;
    }
    bit.raw_set(
        "bswap",
        lua.create_function(|_, args: MultiValue| Ok(num(arg(&args, 0, "bswap")?.swap_bytes())))?,
    )?;
    bit.raw_set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| {
            let value = arg(&args, 0, "tohex")? as u32;
            let n = match args.get(1) {
                None | Some(Value::Nil) => 8,
                Some(_) => arg(&args, 1, "tohex")?,
            };
            let upper = n < 0;
            let digits = n.unsigned_abs().min(8) as usize;
            let text = if upper {
                format!("{value:08X}")
            } else {
                format!("{value:08x}")
            };
            lua.create_string(&text[8 - digits..])
        })?,
    )?;
    Ok(bit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_luabitop() {
        let lua = Lua::new();
        lua.globals().set("bit", table(&lua).unwrap()).unwrap();
        let check = |expr: &str, want: &str| {
            let got: String = lua.load(format!("return tostring({expr})")).eval().unwrap();
            assert_eq!(got, want, "{expr}");
        };
        check("bit.tobit(0xffffffff)", "-1");
        check("bit.tobit(0xffffffff + 1)", "0");
        check("bit.tobit(2^40 + 1234)", "1234");
        check("bit.band(0x12345678, 0xff)", "120");
        check("bit.bor(1, 2, 4)", "7");
        check("bit.bxor(1, 3)", "2");
        check("bit.lshift(1, 31)", "-2147483648");
        check("bit.rshift(-1, 28)", "15");
        check("bit.arshift(-256, 4)", "-16");
        check("bit.rol(0x12345678, 12)", "1164411171");
        check("bit.bswap(0x12345678)", "2018915346");
        check("bit.tohex(1)", "00000001");
        check("bit.tohex(-1, -4)", "FFFF");
        check("bit.bnot(0)", "-1");
    }
}
