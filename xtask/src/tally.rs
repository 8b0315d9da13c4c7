//! Adds up libtest's `test result: ...` lines and the problems that are not test failures
//! (a crashed binary, a VM that did not boot) into one verdict.

/// Counts from one `test result:` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResultLine {
    pub passed: u64,
    pub failed: u64,
}

/// Parses `test result: ok. 25 passed; 0 failed; 0 ignored; ...` (libtest's summary).
pub fn parse_result_line(line: &str) -> Option<ResultLine> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let mut counts = ResultLine::default();
    let mut seen = false;
    for part in rest.split([';', '.']) {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        match what {
            "passed" => {
                counts.passed = n;
                seen = true;
            }
            "failed" => counts.failed = n,
            _ => {}
        }
    }
    seen.then_some(counts)
}

#[derive(Debug, Default)]
pub struct Tally {
    pub passed: u64,
    pub failed: u64,
    /// Failures that are not counted tests: crashes, VM errors, missing binaries.
    pub problems: Vec<String>,
    /// Binaries with failed tests, and how many.
    pub failing: Vec<(String, u64)>,
}

impl Tally {
    pub fn add(&mut self, r: ResultLine) {
        self.passed += r.passed;
        self.failed += r.failed;
    }

    pub fn problem(&mut self, what: impl Into<String>) {
        let what = what.into();
        eprintln!("xtask: FAILURE: {what}");
        self.problems.push(what);
    }

    pub fn failing_binary(&mut self, name: &str, failed: u64) {
        self.failing.push((name.to_string(), failed));
    }

    pub fn ok(&self) -> bool {
        self.failed == 0 && self.problems.is_empty()
    }

    /// The last line `cargo xtask test` prints.
    pub fn summary(&self) -> String {
        format!("{} passed, {} failed", self.passed, self.failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ok_and_failed_summaries() {
        assert_eq!(
            parse_result_line(
                "test result: ok. 25 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.06s"
            ),
            Some(ResultLine {
                passed: 25,
                failed: 0
            })
        );
        assert_eq!(
            parse_result_line(
                "test result: FAILED. 6 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 31.14s"
            ),
            Some(ResultLine {
                passed: 6,
                failed: 1
            })
        );
    }

    #[test]
    fn ignores_other_lines() {
        assert_eq!(parse_result_line("running 7 tests"), None);
        assert_eq!(parse_result_line("test foo ... ok"), None);
        assert_eq!(parse_result_line("test result: garbage"), None);
    }

    #[test]
    fn tally_sums_and_fails_on_problems() {
        let mut t = Tally::default();
        t.add(ResultLine {
            passed: 3,
            failed: 0,
        });
        t.add(ResultLine {
            passed: 2,
            failed: 1,
        });
        assert_eq!(t.summary(), "5 passed, 1 failed");
        assert!(!t.ok());
        let mut t = Tally::default();
        assert!(t.ok());
        t.problem("vm did not boot");
        assert!(!t.ok());
        assert_eq!(t.summary(), "0 passed, 0 failed");
    }
}
