//! Argument parsing and reply formatting shared by the collection commands, with Redis's
//! error wording.

use bytes::Bytes;

use crate::command::CommandError;
use crate::number::parse_i64;

pub(in crate::store) fn is(arg: &[u8], option: &str) -> bool {
    arg.eq_ignore_ascii_case(option.as_bytes())
}

pub(in crate::store) fn int(arg: &[u8]) -> Result<i64, CommandError> {
    parse_i64(arg).ok_or(CommandError::NotAnInteger)
}

/// A float as Redis's `getDoubleFromObject` reads it: `strtod` syntax (`inf`, `-inf`,
/// exponents), no spaces, never NaN.
pub(super) fn float(arg: &[u8]) -> Result<f64, CommandError> {
    parse_float(arg).ok_or(CommandError::NotAFloat)
}

pub(in crate::store) fn parse_float(arg: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(arg).ok()?;
    if text.is_empty() || text.starts_with(|c: char| c.is_whitespace()) {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let value = match lower.trim_start_matches(['+', '-']) {
        "inf" | "infinity" => {
            if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        "nan" => return None,
        rest if rest.starts_with("0x") => {
            let magnitude = parse_hex_float(&rest[2..])?;
            if lower.starts_with('-') {
                -magnitude
            } else {
                magnitude
            }
        }
        _ => text.parse::<f64>().ok()?,
    };
    (!value.is_nan()).then_some(value)
}

/// The digits of a C99 hexadecimal float after `0x` (`1f`, `1.8`, `1p-3`), as `strtod`
/// reads them.
fn parse_hex_float(text: &str) -> Option<f64> {
    let (mantissa, exponent) = match text.split_once('p') {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (int_part, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int_part.is_empty() && fraction.is_empty() {
        return None;
    }
    let mut value = 0f64;
    for digit in int_part.chars() {
        value = value * 16.0 + f64::from(digit.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for digit in fraction.chars() {
        value += f64::from(digit.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    Some(value * 2f64.powi(exponent))
}

/// A double as Redis 7.0 replies it (`%.17g`; `inf` / `-inf`).
pub(crate) fn format_double(value: f64) -> Bytes {
    if value.is_infinite() {
        return Bytes::from_static(if value > 0.0 { b"inf" } else { b"-inf" });
    }
    // Whole scores are the usual ones: below 10^17 `%.17g` writes them as the integer they
    // are, without the two `format!` passes (which were most of a WITHSCORES reply's cost).
    if value.fract() == 0.0 && value.abs() < 1e17 && value != 0.0 {
        return crate::number::format_i64(value as i64);
    }
    Bytes::from(format_g17(value))
}

/// C's `%.17g`.
fn format_g17(value: f64) -> String {
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.into();
    }
    const PRECISION: i32 = 17;
    // `{:.16e}` gives the 17 significant digits and the exponent %g decides with.
    let sci = format!("{:.*e}", (PRECISION - 1) as usize, value);
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..PRECISION).contains(&exponent) {
        let mantissa = trim_fraction(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    } else {
        let decimals = (PRECISION - 1 - exponent).max(0) as usize;
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

/// A long double as Redis's `ld2string(..., LD_STR_HUMAN)` prints it (HINCRBYFLOAT,
/// INCRBYFLOAT): fixed notation, at most 17 decimals, no trailing zeros. Computed in f64,
/// so 15 significant digits are kept, which prints what the long double arithmetic would
/// for decimal inputs of ordinary size.
pub(crate) fn format_human(value: f64) -> Bytes {
    if value.fract() == 0.0 || value.abs() >= 1e15 {
        return Bytes::from(format!("{value:.0}"));
    }
    let int_digits = (value.abs().log10().floor() as i32 + 1).max(1);
    let decimals = (15 - int_digits).clamp(0, 17) as usize;
    Bytes::from(trim_fraction(&format!("{value:.decimals$}")).to_string())
}

/// Redis's list/range index rules: negative counts from the end; the result is clamped to
/// the range, `None` when empty.
pub(super) fn clamp_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    (start <= stop && start < len && stop >= 0).then_some((start as usize, stop as usize))
}

/// An optional positive count (LPOP, SPOP, ZPOPMIN ...): `None` without one.
pub(super) fn optional_count(a: &[Bytes], at: usize) -> Result<Option<usize>, CommandError> {
    match a.get(at) {
        None => Ok(None),
        Some(arg) => {
            let count = parse_i64(arg).ok_or(CommandError::MustBePositive)?;
            if count < 0 {
                return Err(CommandError::MustBePositive);
            }
            Ok(Some(count as usize))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_like_redis_7_0() {
        for (value, text) in [
            (1.5, "1.5"),
            (3.0, "3"),
            (1.1, "1.1000000000000001"),
            (0.1, "0.10000000000000001"),
            (1e20, "1e+20"),
            (1e-5, "1.0000000000000001e-05"),
            (-2.5, "-2.5"),
            (123456789.0, "123456789"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(&format_double(value)[..], text.as_bytes(), "{value}");
        }
    }

    /// The whole-number shortcut writes what `%.17g` writes, up to where it stops applying.
    #[test]
    fn whole_scores_take_the_shortcut_and_print_the_same() {
        let mut values = vec![1.0, -1.0, 42.0, -7e15, 2f64.powi(53), 2f64.powi(53) + 2.0];
        values.extend([
            9.999_999_999_999_998e16,
            1e17,
            -1e17,
            1.5e17,
            123_456_789_012_345_680.0,
        ]);
        values.extend((0..60).map(|i| (1u64 << i) as f64 * 3.0));
        for value in values {
            assert_eq!(
                &format_double(value)[..],
                format_g17(value).as_bytes(),
                "{value}"
            );
        }
    }

    #[test]
    fn human_doubles() {
        assert_eq!(&format_human(10.5)[..], b"10.5");
        assert_eq!(&format_human(1.1 + 2.2)[..], b"3.3");
        assert_eq!(&format_human(5000.0)[..], b"5000");
        assert_eq!(&format_human(-0.25)[..], b"-0.25");
    }

    #[test]
    fn floats_parse_like_strtod_without_nan() {
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_float(b"1e3"), Some(1000.0));
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b" 1"), None);
        assert_eq!(parse_float(b"abc"), None);
        assert_eq!(parse_float(b"0x10"), Some(16.0));
        assert_eq!(parse_float(b"-0X1.8p1"), Some(-3.0));
        assert_eq!(parse_float(b"0x"), None);
    }

    #[test]
    fn ranges_clamp() {
        assert_eq!(clamp_range(0, -1, 3), Some((0, 2)));
        assert_eq!(clamp_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(clamp_range(2, 1, 3), None);
        assert_eq!(clamp_range(5, 10, 3), None);
        assert_eq!(clamp_range(0, -4, 3), None);
    }
}
