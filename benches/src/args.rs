//! A minimal `--flag value` parser.
//!
//! The bench binaries have a handful of flags each; a CLI framework would add a compile-heavy
//! dependency to a 2-core build box for no benefit. Flags are *taken* out as they are read so
//! that `finish` can reject anything the binary did not ask for (typos silently ignored would
//! make a benchmark measure something other than what its command line says).

use std::fmt;
use std::str::FromStr;

/// Why a command line was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgsError {
    /// A required flag was absent.
    Missing(String),
    /// A flag that takes a value was last on the line.
    MissingValue(String),
    /// A value did not parse.
    Invalid {
        flag: String,
        value: String,
        reason: String,
    },
    /// Flags (or positional words) that no one asked for.
    Unexpected(Vec<String>),
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgsError::Missing(flag) => write!(f, "missing required flag --{flag}"),
            ArgsError::MissingValue(flag) => write!(f, "flag --{flag} needs a value"),
            ArgsError::Invalid {
                flag,
                value,
                reason,
            } => write!(f, "invalid value {value:?} for --{flag}: {reason}"),
            ArgsError::Unexpected(words) => write!(f, "unexpected arguments: {}", words.join(" ")),
        }
    }
}

impl std::error::Error for ArgsError {}

/// Parsed command line: flags with optional values, plus positional words.
#[derive(Debug, Default)]
pub struct Args {
    flags: Vec<(String, Option<String>)>,
    positional: Vec<String>,
}

impl Args {
    /// Parses `words` (without the program name). `switches` are the flags that never take a
    /// value; every other `--flag` consumes the next word (or uses `--flag=value`).
    pub fn parse<I, S>(words: I, switches: &[&str]) -> Result<Args, ArgsError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut args = Args::default();
        let mut words = words.into_iter().map(Into::into);
        while let Some(word) = words.next() {
            let Some(flag) = word.strip_prefix("--") else {
                args.positional.push(word);
                continue;
            };
            if let Some((name, value)) = flag.split_once('=') {
                args.flags.push((name.to_string(), Some(value.to_string())));
            } else if switches.contains(&flag) {
                args.flags.push((flag.to_string(), None));
            } else {
                let value = words
                    .next()
                    .ok_or_else(|| ArgsError::MissingValue(flag.to_string()))?;
                args.flags.push((flag.to_string(), Some(value)));
            }
        }
        Ok(args)
    }

    /// Parses the current process's command line.
    pub fn from_env(switches: &[&str]) -> Result<Args, ArgsError> {
        Args::parse(std::env::args().skip(1), switches)
    }

    /// Takes the first positional word, if any.
    pub fn take_positional(&mut self) -> Option<String> {
        if self.positional.is_empty() {
            None
        } else {
            Some(self.positional.remove(0))
        }
    }

    /// Takes every value given for `name` (flags that may repeat).
    pub fn take_all(&mut self, name: &str) -> Result<Vec<String>, ArgsError> {
        let mut values = Vec::new();
        let mut kept = Vec::with_capacity(self.flags.len());
        for (flag, value) in self.flags.drain(..) {
            if flag == name {
                values.push(value.ok_or_else(|| ArgsError::MissingValue(flag.clone()))?);
            } else {
                kept.push((flag, value));
            }
        }
        self.flags = kept;
        Ok(values)
    }

    /// Takes the last value given for `name`, parsed.
    pub fn opt<T>(&mut self, name: &str) -> Result<Option<T>, ArgsError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        let Some(raw) = self.take_all(name)?.pop() else {
            return Ok(None);
        };
        raw.parse()
            .map(Some)
            .map_err(|e: T::Err| ArgsError::Invalid {
                flag: name.to_string(),
                value: raw.clone(),
                reason: e.to_string(),
            })
    }

    /// Takes `name`, or `default` if absent.
    pub fn get<T>(&mut self, name: &str, default: T) -> Result<T, ArgsError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        Ok(self.opt(name)?.unwrap_or(default))
    }

    /// Takes a required flag.
    pub fn require<T>(&mut self, name: &str) -> Result<T, ArgsError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        self.opt(name)?
            .ok_or_else(|| ArgsError::Missing(name.to_string()))
    }

    /// Takes a switch: true when present.
    pub fn switch(&mut self, name: &str) -> bool {
        let before = self.flags.len();
        self.flags.retain(|(flag, _)| flag != name);
        before != self.flags.len()
    }

    /// Fails if anything was given that no one took.
    pub fn finish(self) -> Result<(), ArgsError> {
        let mut leftover: Vec<String> = self
            .flags
            .into_iter()
            .map(|(flag, _)| format!("--{flag}"))
            .collect();
        leftover.extend(self.positional);
        if leftover.is_empty() {
            Ok(())
        } else {
            Err(ArgsError::Unexpected(leftover))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_values_switches_and_equals_form() {
        let mut args = Args::parse(
            ["run", "--conns", "64", "--probe", "--size=4096", "extra"],
            &["probe"],
        )
        .unwrap();
        assert_eq!(args.take_positional().as_deref(), Some("run"));
        assert_eq!(args.require::<usize>("conns").unwrap(), 64);
        assert!(args.switch("probe"));
        assert!(!args.switch("probe"));
        assert_eq!(args.get::<usize>("size", 64).unwrap(), 4096);
        assert_eq!(args.get::<usize>("depth", 1).unwrap(), 1);
        assert_eq!(
            args.finish(),
            Err(ArgsError::Unexpected(vec!["extra".to_string()]))
        );
    }

    #[test]
    fn repeated_flags_are_all_returned_and_last_wins_for_single() {
        let mut args = Args::parse(
            ["--server", "a=x", "--server", "b=y", "--n", "1", "--n", "2"],
            &[],
        )
        .unwrap();
        assert_eq!(args.take_all("server").unwrap(), vec!["a=x", "b=y"]);
        assert_eq!(args.require::<u32>("n").unwrap(), 2);
        assert!(args.finish().is_ok());
    }

    #[test]
    fn reports_bad_values_missing_values_and_leftovers() {
        let mut args = Args::parse(["--conns", "many"], &[]).unwrap();
        assert!(matches!(
            args.require::<usize>("conns"),
            Err(ArgsError::Invalid { .. })
        ));
        assert_eq!(
            Args::parse(["--conns"], &[]).unwrap_err(),
            ArgsError::MissingValue("conns".to_string())
        );
        let mut args = Args::parse(["--typo", "1"], &[]).unwrap();
        assert_eq!(
            args.require::<usize>("conns"),
            Err(ArgsError::Missing("conns".into()))
        );
        assert_eq!(
            args.finish(),
            Err(ArgsError::Unexpected(vec!["--typo".to_string()]))
        );
    }
}
