//! Extra figures a peer server prints at exit, beside its `stats` lines:
//! `metric key=value key=value ...` (numbers only). benchctl adds them to the run's metrics, so
//! a suite's table can show them (allocations and task polls per request, head-of-line
//! counts); servers that print none leave those cells empty.

use std::fmt::Write;

/// One `metric` line from `(key, value)` pairs.
pub fn metric_line(pairs: &[(&str, f64)]) -> String {
    let mut line = String::from("metric");
    for (k, v) in pairs {
        let _ = write!(line, " {k}={v}");
    }
    line
}

/// The pairs of a `metric` line; `None` for any other line. A pair whose value is not a
/// number makes the whole line `None` (a server bug worth noticing, not half a line).
pub fn parse_metric_line(line: &str) -> Option<Vec<(String, f64)>> {
    let rest = line.trim().strip_prefix("metric ")?;
    rest.split_whitespace()
        .map(|pair| {
            let (k, v) = pair.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Per-request figures from process-wide counters taken before and after serving.
pub fn per_request(pairs: &mut Vec<(&'static str, f64)>, requests: u64, allocs: u64, polls: u64) {
    pairs.push(("server_requests", requests as f64));
    if requests > 0 {
        pairs.push(("server_allocs_per_req", allocs as f64 / requests as f64));
        pairs.push(("server_polls_per_req", polls as f64 / requests as f64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_others_are_ignored() {
        let line = metric_line(&[("hol_p99", 256.0), ("server_allocs_per_req", 1.5)]);
        assert_eq!(line, "metric hol_p99=256 server_allocs_per_req=1.5");
        assert_eq!(
            parse_metric_line(&line),
            Some(vec![
                ("hol_p99".to_string(), 256.0),
                ("server_allocs_per_req".to_string(), 1.5)
            ])
        );
        assert_eq!(parse_metric_line("stats shard=0 accepted=1"), None);
        assert_eq!(parse_metric_line("metric hol_p99=lots"), None);
    }

    #[test]
    fn per_request_divides_and_skips_zero_requests() {
        let mut pairs = Vec::new();
        per_request(&mut pairs, 4, 10, 6);
        assert_eq!(
            pairs,
            vec![
                ("server_requests", 4.0),
                ("server_allocs_per_req", 2.5),
                ("server_polls_per_req", 1.5)
            ]
        );
        let mut none = Vec::new();
        per_request(&mut none, 0, 10, 6);
        assert_eq!(none, vec![("server_requests", 0.0)]);
    }
}
