//! How each kind of option reads its arguments and writes its value, with Redis 7.0's rules
//! and error texts (`config.c`): a value is kept as the canonical text CONFIG GET shows
//! (memory sizes in bytes, enums by name, booleans as `yes`/`no`).

use crate::number::parse_memory;

/// The type of an option's value and the bounds Redis checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `yes` / `no`.
    Bool,
    /// A plain integer between the bounds (inclusive).
    Int { min: i64, max: i64 },
    /// An unsigned integer (Redis prints its bounds unsigned).
    UInt { min: u64, max: u64 },
    /// Bytes, with Redis's units (`1k` = 1000, `1kb` = 1024, ... up to `gb`).
    Memory { min: i64, max: i64 },
    /// Unsigned bytes (`maxmemory`).
    UMemory { max: u64 },
    /// Bytes, or `N%` (kept as `N%`) of at most `max_percent` (`maxmemory-clients`).
    MemoryOrPercent { max_percent: i64 },
    /// An octal number (`unixsocketperm`).
    Octal { max: u64 },
    /// One name of the list.
    Enum(&'static [&'static str]),
    /// Several names of the list, as flags (`shutdown-on-sigint`): the first name is the
    /// empty set.
    Flags(&'static [&'static str]),
    /// Any text.
    Str,
    /// Special syntax: see [`Special`].
    Special(Special),
}

/// The options whose syntax is their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// `save <seconds> <changes> ...` or `save ""`.
    Save,
    /// `client-output-buffer-limit <class> <hard> <soft> <seconds> ...`.
    ClientOutputBufferLimit,
    /// Three integers between -2000 and 2000.
    OomScoreAdjValues,
    /// The event classes `Ag$lshzxeKEtmdn`.
    NotifyKeyspaceEvents,
    /// Addresses separated by spaces.
    Bind,
    /// `<host> <port>` or `no one`.
    ReplicaOf,
    /// Percentiles between 0 and 100.
    LatencyPercentiles,
    /// A directory (reported as an absolute path).
    Dir,
    /// Any value a per-option check accepts (corewire's own options): see
    /// `OptionSpec::check` in the option table.
    Checked,
}

/// Whether the option takes several arguments (Redis's `MULTI_ARG_CONFIG`): they are joined
/// by spaces and split again.
pub fn is_multi_arg(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Flags(_)
            | Kind::Special(
                Special::Save
                    | Special::ClientOutputBufferLimit
                    | Special::OomScoreAdjValues
                    | Special::Bind
                    | Special::ReplicaOf
                    | Special::LatencyPercentiles
            )
    )
}

/// Reads `args` (one argument, or several for a multi-argument option) as a value of `kind`,
/// returning its canonical text or Redis's reason.
pub fn parse(kind: Kind, args: &[String]) -> Result<String, String> {
    let one = || -> Result<&str, String> {
        match args {
            [value] => Ok(value),
            _ => Err("wrong number of arguments".into()),
        }
    };
    match kind {
        Kind::Bool => match one()?.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int { min, max } => {
            let value: i64 = one()?
                .parse()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            bounded(value, min, max)
        }
        Kind::UInt { min, max } => {
            let text = one()?;
            let value: i64 = text
                .parse()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            // Redis stores it unsigned: a negative number wraps past the upper bound.
            let value = value as u64;
            if value < min || value > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(value.to_string())
        }
        Kind::Memory { min, max } => {
            let text = one()?;
            let value = parse_memory(text)
                .and_then(|v| i64::try_from(v).ok())
                .ok_or_else(|| "argument must be a memory value".to_string())?;
            bounded(value, min, max)
        }
        Kind::UMemory { max } => {
            let value = parse_memory(one()?)
                .ok_or_else(|| "argument must be a memory value".to_string())?;
            if value > max {
                return Err(format!("argument must be between 0 and {max} inclusive"));
            }
            Ok(value.to_string())
        }
        Kind::MemoryOrPercent { max_percent } => {
            let text = one()?;
            if let Some(value) = parse_memory(text) {
                return Ok(value.to_string());
            }
            match text.strip_suffix('%').map(str::parse::<i64>) {
                Some(Ok(percent)) if percent >= 0 => {
                    if percent > max_percent {
                        Err(format!(
                            "percentage argument must be less or equal to {max_percent}"
                        ))
                    } else {
                        Ok(format!("{percent}%"))
                    }
                }
                _ => Err("argument must be a memory or percent value".into()),
            }
        }
        Kind::Octal { max } => {
            let value = u64::from_str_radix(one()?, 8)
                .map_err(|_| "argument couldn't be parsed as an octal number".to_string())?;
            if value > max {
                return Err(format!("argument must be between 0 and {max:o} inclusive"));
            }
            Ok(format!("{value:o}"))
        }
        Kind::Enum(names) => {
            let text = one().map_err(|_| one_of(names))?;
            names
                .iter()
                .find(|name| name.eq_ignore_ascii_case(text))
                .map(|name| (*name).to_owned())
                .ok_or_else(|| one_of(names))
        }
        Kind::Flags(names) => parse_flags(names, args),
        Kind::Str => Ok(one()?.to_owned()),
        Kind::Special(special) => parse_special(special, args),
    }
}

fn bounded(value: i64, min: i64, max: i64) -> Result<String, String> {
    if value < min || value > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(value.to_string())
}

fn one_of(names: &[&str]) -> String {
    format!(
        "argument(s) must be one of the following: {}",
        names.join(", ")
    )
}

/// Redis's bit-flag enums: `default` alone, or any of the others (`save` and `nosave`
/// exclude each other), printed in the table's order.
fn parse_flags(names: &'static [&'static str], args: &[String]) -> Result<String, String> {
    if args.is_empty() {
        return Err(one_of(names));
    }
    let mut chosen = vec![false; names.len()];
    for arg in args {
        let index = names
            .iter()
            .position(|name| name.eq_ignore_ascii_case(arg))
            .ok_or_else(|| one_of(names))?;
        chosen[index] = true;
    }
    let picked: Vec<&str> = (1..names.len())
        .filter(|&i| chosen[i])
        .map(|i| names[i])
        .collect();
    if picked.contains(&"save") && picked.contains(&"nosave") {
        return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
    }
    Ok(if picked.is_empty() {
        names[0].to_owned()
    } else {
        picked.join(" ")
    })
}

fn parse_special(special: Special, args: &[String]) -> Result<String, String> {
    match special {
        Special::Save => {
            let args: &[String] = match args {
                [only] if only.is_empty() => &[],
                other => other,
            };
            let invalid = || "Invalid save parameters".to_string();
            if !args.len().is_multiple_of(2) {
                return Err(invalid());
            }
            let mut parts = Vec::with_capacity(args.len());
            for (i, arg) in args.iter().enumerate() {
                let value: i64 = arg.parse().map_err(|_| invalid())?;
                if (i % 2 == 0 && value < 1) || (i % 2 == 1 && value < 0) {
                    return Err(invalid());
                }
                parts.push(value.to_string());
            }
            Ok(parts.join(" "))
        }
        Special::ClientOutputBufferLimit => {
            let mut limits = OutputBufferLimits::default();
            limits.update(args)?;
            Ok(limits.to_string())
        }
        Special::OomScoreAdjValues => {
            if args.len() != 3 {
                return Err("wrong number of arguments".into());
            }
            let mut values = Vec::with_capacity(3);
            for arg in args {
                match arg.parse::<i64>() {
                    Ok(v) if (-2000..=2000).contains(&v) => values.push(v.to_string()),
                    _ => {
                        return Err("Invalid oom-score-adj-values, elements must be between \
                                    -2000 and 2000."
                            .into())
                    }
                }
            }
            Ok(values.join(" "))
        }
        Special::NotifyKeyspaceEvents => {
            let [classes] = args else {
                return Err("wrong number of arguments".into());
            };
            let flags = crate::notify::EventFlags::parse(classes).ok_or_else(|| {
                "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string()
            })?;
            Ok(flags.to_string())
        }
        Special::Bind => {
            if args.len() > super::bind::MAX_ADDRESSES {
                return Err("Too many bind addresses specified.".into());
            }
            let args: &[String] = match args {
                [only] if only.is_empty() => &[],
                other => other,
            };
            Ok(args.join(" "))
        }
        Special::ReplicaOf => match args {
            [only] if only.is_empty() => Ok(String::new()),
            [host, port] if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") => {
                Ok(String::new())
            }
            [host, port] => match port.parse::<u16>() {
                Ok(port) => Ok(format!("{host} {port}")),
                Err(_) => Err("Invalid master port".into()),
            },
            _ => Err("wrong number of arguments".into()),
        },
        Special::LatencyPercentiles => {
            let args: &[String] = match args {
                [only] if only.is_empty() => &[],
                other => other,
            };
            let mut values = Vec::with_capacity(args.len());
            for arg in args {
                match arg.parse::<f64>() {
                    Ok(v) if (0.0..=100.0).contains(&v) => values.push(format_percentile(v)),
                    Ok(_) => {
                        return Err("latency-tracking-info-percentiles parameters should sit \
                                    between [0.0,100.0]"
                            .into())
                    }
                    Err(_) => {
                        return Err("Invalid latency-tracking-info-percentiles parameters".into())
                    }
                }
            }
            Ok(values.join(" "))
        }
        Special::Dir => {
            let [dir] = args else {
                return Err("wrong number of arguments".into());
            };
            Ok(dir.clone())
        }
        // Validated by the option's own check.
        Special::Checked => match args {
            [value] => Ok(value.clone()),
            _ => Err("wrong number of arguments".into()),
        },
    }
}

/// A percentile as Redis prints it (`%f` without trailing zeros: `99.9`, `50`).
pub fn format_percentile(value: f64) -> String {
    let text = format!("{value:.6}");
    let text = text.trim_end_matches('0');
    text.trim_end_matches('.').to_owned()
}

/// Redis's three client classes' output buffer limits (hard, soft, soft seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputBufferLimits {
    pub normal: (u64, u64, u64),
    pub replica: (u64, u64, u64),
    pub pubsub: (u64, u64, u64),
}

impl Default for OutputBufferLimits {
    fn default() -> Self {
        OutputBufferLimits {
            normal: (0, 0, 0),
            replica: (256 << 20, 64 << 20, 60),
            pubsub: (32 << 20, 8 << 20, 60),
        }
    }
}

impl OutputBufferLimits {
    /// Applies `<class> <hard> <soft> <seconds>` groups, all or none.
    pub fn update(&mut self, args: &[String]) -> Result<(), String> {
        if !args.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.".into());
        }
        let mut next = *self;
        for group in args.chunks(4) {
            let slot = match group[0].to_ascii_lowercase().as_str() {
                "normal" => &mut next.normal,
                "replica" | "slave" => &mut next.replica,
                "pubsub" => &mut next.pubsub,
                _ => {
                    return Err(
                        "Invalid client class specified in buffer limit configuration.".into(),
                    )
                }
            };
            let hard = parse_memory(&group[1]);
            let soft = parse_memory(&group[2]);
            let seconds = group[3].parse::<u64>().ok();
            match (hard, soft, seconds) {
                (Some(hard), Some(soft), Some(seconds)) => *slot = (hard, soft, seconds),
                _ => {
                    return Err(
                        "Error in hard, soft or soft_seconds setting in buffer limit \
                                configuration."
                            .into(),
                    )
                }
            }
        }
        *self = next;
        Ok(())
    }

    pub fn parse(text: &str) -> Option<OutputBufferLimits> {
        let args: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        let mut limits = OutputBufferLimits::default();
        limits.update(&args).ok()?;
        Some(limits)
    }
}

impl std::fmt::Display for OutputBufferLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let classes = [
            ("normal", self.normal),
            ("slave", self.replica),
            ("pubsub", self.pubsub),
        ];
        for (i, (name, (hard, soft, seconds))) in classes.into_iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{name} {hard} {soft} {seconds}")?;
        }
        Ok(())
    }
}

/// Redis's `rewriteConfigFormatMemory`: the largest of gb, mb, kb that divides the value.
pub fn format_memory_for_file(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "gb"), (1 << 20, "mb"), (1 << 10, "kb")];
    for (unit, suffix) in UNITS {
        if bytes != 0 && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(kind: Kind, args: &[&str]) -> Result<String, String> {
        parse(
            kind,
            &args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        )
    }

    #[test]
    fn scalars_follow_redis() {
        assert_eq!(p(Kind::Bool, &["YES"]), Ok("yes".into()));
        assert_eq!(
            p(Kind::Bool, &["maybe"]),
            Err("argument must be 'yes' or 'no'".into())
        );
        let int = Kind::Int { min: 0, max: 10 };
        assert_eq!(p(int, &["7"]), Ok("7".into()));
        assert_eq!(
            p(int, &["11"]),
            Err("argument must be between 0 and 10 inclusive".into())
        );
        assert_eq!(
            p(int, &["x"]),
            Err("argument couldn't be parsed into an integer".into())
        );
        let mem = Kind::Memory {
            min: 0,
            max: i64::MAX,
        };
        assert_eq!(p(mem, &["1kb"]), Ok("1024".into()));
        assert_eq!(p(mem, &["1k"]), Ok("1000".into()));
        assert_eq!(
            p(mem, &["lots"]),
            Err("argument must be a memory value".into())
        );
        let pct = Kind::MemoryOrPercent { max_percent: 100 };
        assert_eq!(p(pct, &["10%"]), Ok("10%".into()));
        assert_eq!(
            p(pct, &["200%"]),
            Err("percentage argument must be less or equal to 100".into())
        );
        assert_eq!(p(Kind::Octal { max: 0o777 }, &["755"]), Ok("755".into()));
        let policy = Kind::Enum(&["a-b", "c"]);
        assert_eq!(p(policy, &["C"]), Ok("c".into()));
        assert_eq!(
            p(policy, &["d"]),
            Err("argument(s) must be one of the following: a-b, c".into())
        );
    }

    #[test]
    fn flags_and_specials() {
        let sig = Kind::Flags(&["default", "save", "nosave", "now", "force"]);
        assert_eq!(p(sig, &["now", "nosave"]), Ok("nosave now".into()));
        assert_eq!(p(sig, &["default"]), Ok("default".into()));
        assert!(p(sig, &["save", "nosave"]).is_err());
        let save = Kind::Special(Special::Save);
        assert_eq!(p(save, &[""]), Ok("".into()));
        assert_eq!(
            p(save, &["3600", "1", "300", "100"]),
            Ok("3600 1 300 100".into())
        );
        assert!(p(save, &["3600"]).is_err());
        assert!(p(save, &["0", "1"]).is_err());
        let obuf = Kind::Special(Special::ClientOutputBufferLimit);
        assert_eq!(
            p(obuf, &["pubsub", "1mb", "0", "0"]),
            Ok("normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 0 0".into())
        );
        let pct = Kind::Special(Special::LatencyPercentiles);
        assert_eq!(p(pct, &["0.0", "50.0", "99.9"]), Ok("0 50 99.9".into()));
        assert!(p(pct, &["101"]).is_err());
        assert_eq!(format_memory_for_file(3 << 20), "3mb");
        assert_eq!(format_memory_for_file(1000), "1000");
        assert_eq!(format_memory_for_file(0), "0");
    }
}
