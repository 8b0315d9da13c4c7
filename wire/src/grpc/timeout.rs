//! The `grpc-timeout` header: at most eight ASCII digits and a unit (`H`ours, `M`inutes,
//! `S`econds, `m`illis, `u`micros, `n`anos).

use std::time::Duration;

/// The budget a `grpc-timeout` value gives; `None` for a malformed one.
pub fn parse_timeout(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `budget` as a `grpc-timeout` value, in the finest unit whose count fits eight digits
/// (rounded up, so a deadline is never made shorter than asked).
pub fn format_timeout(budget: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let nanos = budget.as_nanos();
    for (unit, per) in [
        ('n', 1u128),
        ('u', 1_000),
        ('m', 1_000_000),
        ('S', 1_000_000_000),
        ('M', 60_000_000_000),
    ] {
        let n = nanos.div_ceil(per);
        if n <= MAX {
            return format!("{n}{unit}");
        }
    }
    format!("{}H", nanos.div_ceil(3_600_000_000_000).min(MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_parses() {
        assert_eq!(parse_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_timeout(b"2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_timeout(b"3S"), Some(Duration::from_secs(3)));
        assert_eq!(parse_timeout(b"40m"), Some(Duration::from_millis(40)));
        assert_eq!(parse_timeout(b"500u"), Some(Duration::from_micros(500)));
        assert_eq!(
            parse_timeout(b"99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
    }

    #[test]
    fn malformed_values_are_refused() {
        for bad in [
            &b""[..],
            b"S",
            b"10",
            b"10s",
            b"123456789S",
            b"-1S",
            b"1 S",
            b"1.5S",
        ] {
            assert_eq!(
                parse_timeout(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn formatting_round_trips_without_shortening() {
        for budget in [
            Duration::from_nanos(1),
            Duration::from_micros(1500),
            Duration::from_millis(250),
            Duration::from_secs(5),
            Duration::from_secs(86_400 * 400),
        ] {
            let text = format_timeout(budget);
            let back = parse_timeout(text.as_bytes()).unwrap();
            assert!(back >= budget, "{text}");
        }
        assert_eq!(format_timeout(Duration::from_millis(250)), "250000u");
        assert_eq!(format_timeout(Duration::from_secs(5)), "5000000u");
    }
}
