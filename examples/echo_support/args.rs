//! A small `--flag value` parser for the examples (no CLI crate needed for a handful of
//! flags): take each flag by name with its type, then reject whatever is left over.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// An argument that is not `--name`.
    Unexpected(String),
    /// `--name` as the last argument, with no value.
    MissingValue(String),
    /// The same flag twice.
    Repeated(String),
    /// A value that does not parse.
    Invalid {
        flag: String,
        value: String,
        reason: String,
    },
    /// A required flag that was not given.
    Required(String),
    /// Flags nobody asked for.
    Unknown(Vec<String>),
    /// Flags that do not make sense together.
    Conflict(String),
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::Unexpected(a) => write!(f, "unexpected argument {a:?}"),
            ArgError::MissingValue(n) => write!(f, "--{n} needs a value"),
            ArgError::Repeated(n) => write!(f, "--{n} given twice"),
            ArgError::Invalid {
                flag,
                value,
                reason,
            } => write!(f, "--{flag} {value:?}: {reason}"),
            ArgError::Required(n) => write!(f, "--{n} is required"),
            ArgError::Unknown(names) => write!(f, "unknown flag(s): --{}", names.join(", --")),
            ArgError::Conflict(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ArgError {}

/// Flags given as `--name value` or `--name=value`; bare `--name` (a switch) has value "".
pub struct Flags {
    values: BTreeMap<String, String>,
}

impl Flags {
    pub fn from_env() -> Result<Flags, ArgError> {
        Flags::parse(std::env::args().skip(1))
    }

    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Flags, ArgError> {
        let mut values = BTreeMap::new();
        let mut args = args.into_iter().peekable();
        while let Some(arg) = args.next() {
            let Some(name) = arg.strip_prefix("--") else {
                return Err(ArgError::Unexpected(arg));
            };
            let (name, value) = match name.split_once('=') {
                Some((n, v)) => (n.to_string(), v.to_string()),
                None => {
                    let takes_value = args.peek().is_some_and(|next| !next.starts_with("--"));
                    let value = if takes_value {
                        args.next().unwrap_or_default()
                    } else {
                        String::new()
                    };
                    (name.to_string(), value)
                }
            };
            if values.insert(name.clone(), value).is_some() {
                return Err(ArgError::Repeated(name));
            }
        }
        Ok(Flags { values })
    }

    /// Whether the switch `--name` was given.
    pub fn switch(&mut self, name: &str) -> bool {
        self.values.remove(name).is_some()
    }

    pub fn optional<T>(&mut self, name: &str) -> Result<Option<T>, ArgError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        match self.values.remove(name) {
            None => Ok(None),
            Some(v) if v.is_empty() => Err(ArgError::MissingValue(name.to_string())),
            Some(v) => v.parse().map(Some).map_err(|e: T::Err| ArgError::Invalid {
                flag: name.to_string(),
                value: v,
                reason: e.to_string(),
            }),
        }
    }

    pub fn required<T>(&mut self, name: &str) -> Result<T, ArgError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        self.optional(name)?
            .ok_or_else(|| ArgError::Required(name.to_string()))
    }

    /// The raw text of `--name`, for values with a grammar of their own.
    pub fn raw(&mut self, name: &str) -> Result<Option<String>, ArgError> {
        match self.values.remove(name) {
            Some(v) if v.is_empty() => Err(ArgError::MissingValue(name.to_string())),
            other => Ok(other),
        }
    }

    /// Error out on flags nobody took.
    pub fn finish(self) -> Result<(), ArgError> {
        if self.values.is_empty() {
            Ok(())
        } else {
            Err(ArgError::Unknown(self.values.into_keys().collect()))
        }
    }
}

/// An `ArgError::Invalid` for values parsed by hand.
pub fn invalid(flag: &str, value: &str, reason: impl Into<String>) -> ArgError {
    ArgError::Invalid {
        flag: flag.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &str) -> Flags {
        Flags::parse(s.split_whitespace().map(String::from)).unwrap()
    }

    #[test]
    fn values_switches_and_leftovers() {
        let mut f = flags("--shards 4 --addr=127.0.0.1:9 --pin --depth 8");
        assert_eq!(f.required::<usize>("shards"), Ok(4));
        assert_eq!(f.raw("addr"), Ok(Some("127.0.0.1:9".into())));
        assert!(f.switch("pin"));
        assert!(!f.switch("pin"));
        assert_eq!(f.optional::<u32>("size"), Ok(None));
        assert_eq!(f.finish(), Err(ArgError::Unknown(vec!["depth".into()])));
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(matches!(
            flags("--shards x").required::<usize>("shards"),
            Err(ArgError::Invalid { .. })
        ));
        assert_eq!(
            flags("--shards").required::<usize>("shards"),
            Err(ArgError::MissingValue("shards".into()))
        );
        assert_eq!(
            Flags::parse(["4".to_string()]).err(),
            Some(ArgError::Unexpected("4".into()))
        );
        assert_eq!(
            Flags::parse(["--a", "1", "--a", "2"].map(String::from)).err(),
            Some(ArgError::Repeated("a".into()))
        );
    }
}
