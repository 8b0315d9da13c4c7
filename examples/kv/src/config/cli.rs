//! The command line, read by clap: a [`Command`] built from the option table ([`super::table`]),
//! one flag per row, so `--help` lists every option with its default, `-v`/`--version`
//! answers, and a misspelt flag gets clap's error with a suggestion.
//!
//! The syntax is redis-server's: an optional configuration file first, then `--name value`
//! options that are appended after the file as if they were its last lines ([`Directive`]s, in
//! the order given, which matters: `save` lines add up, `--pin` then `--no-pin`). A
//! multi-argument option takes the words up to the next flag (`--save 900 1`), or one
//! argument that the loader splits again (`--save "900 1"`); `--save` alone is `save ""`; a
//! one-value option's value may start with `-` (`--logfile --x`). A few of Redis's rules clap
//! has no word for are applied to the arguments first (`normalize`).
//!
//! Values are checked by the loader ([`super::load`]), as the file's are, so that every
//! problem is reported together.

use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};

use super::file::{quote, split_args, Directive, Origin};
use super::table::{self, Effect, OptionSpec, NO_STATE, OPTIONS, OURS, STRICT};
use super::value::{is_multi_arg, Kind, Special};

const BIN: &str = "corewire-kv";
/// The positional argument's id (no option is named in capitals).
const CONFIG_FILE: &str = "CONFIG_FILE";

/// corewire's older spellings of Redis options, still accepted (hidden from `--help`).
const OLD_SPELLINGS: [(&str, &str); 3] = [
    ("fsync", "appendfsync"),
    ("aof-rewrite-percentage", "auto-aof-rewrite-percentage"),
    ("aof-rewrite-min-size", "auto-aof-rewrite-min-size"),
];

/// Flags standing for an option at a fixed value.
const NEGATIONS: [(&str, &str, &str); 1] = [("no-pin", "pin", "no")];

/// Redis directives that are no row of the table: the loader applies them or says why this
/// server does not support them, so the command line passes them on as words.
const OTHER_DIRECTIVES: [&str; 4] = ["user", "rename-command", "loadmodule", "sentinel"];

/// What the command line asks: the configuration file, and the directives its options stand
/// for, in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CommandLine {
    pub config_file: Option<PathBuf>,
    pub directives: Vec<Directive>,
}

/// A `--help` section: its heading, which rows it lists, and what a row without its own help
/// text says.
type Section = (&'static str, fn(&OptionSpec) -> bool, &'static str);

/// `--help`'s sections, in order.
const SECTIONS: [Section; 4] = [
    ("corewire's options", |o| o.has(OURS), ""),
    (
        "Redis's options that work here",
        |o| !o.has(OURS) && o.effect != Effect::Inert,
        "as in Redis",
    ),
    (
        "Redis's options accepted with no effect here (reported at start-up when set)",
        |o| !o.has(OURS) && o.effect == Effect::Inert && !o.has(STRICT),
        "no effect here",
    ),
    (
        "Redis's options for what this server lacks (any value but the default is refused)",
        |o| !o.has(OURS) && o.has(STRICT),
        "only the default is supported",
    ),
];

/// The command line's parser: every row of the table as `--name` (its alias too).
pub fn command() -> Command {
    let mut command = Command::new(BIN)
        .version(format!(
            "{} (Redis {} compatible)",
            env!("CARGO_PKG_VERSION"),
            crate::info::COMPATIBLE_REDIS_VERSION
        ))
        .about("corewire's sharded Redis-compatible server")
        .override_usage(format!("{BIN} [/path/to/redis.conf] [--option value ...]"))
        .after_help(
            "Options are Redis's configuration directives, in the file or as --name value on the\n\
             command line, which comes after the file. A value of several words is given as\n\
             words or as one argument (--save \"3600 1\").",
        )
        // A row's help under its flag: the flags and their value names are of all lengths.
        .next_line_help(true)
        .disable_version_flag(true)
        .arg(
            Arg::new("version")
                .short('v')
                .long("version")
                .short_alias('V')
                .action(ArgAction::Version)
                .help("Print version"),
        )
        .arg(
            Arg::new(CONFIG_FILE)
                .value_name("/path/to/redis.conf")
                .help("Redis's configuration file format (first, when given)"),
        );
    for (heading, member, fallback) in SECTIONS {
        command = command.next_help_heading(heading);
        for spec in OPTIONS.iter().filter(|spec| member(spec)) {
            command = command.arg(option(spec, fallback));
        }
    }
    for (flag, name, value) in NEGATIONS {
        command = command.arg(
            Arg::new(flag)
                .long(flag)
                .num_args(0)
                .default_missing_value(value)
                .action(ArgAction::Append)
                .help(format!("--{name} {value}")),
        );
    }
    for name in OTHER_DIRECTIVES {
        command = command.arg(
            Arg::new(name)
                .long(name)
                .num_args(0..)
                .default_missing_value("")
                .action(ArgAction::Append)
                .hide(true),
        );
    }
    command
}

/// One row's flag.
fn option(spec: &'static OptionSpec, fallback: &str) -> Arg {
    let help = if spec.help.is_empty() {
        fallback
    } else {
        spec.help
    };
    let mut arg = Arg::new(spec.name)
        .long(spec.name)
        .action(ArgAction::Append)
        .value_name(value_name(spec.kind))
        .default_value(spec.default)
        .help(help.to_owned());
    if let Some(alias) = spec.alias {
        arg = arg.visible_alias(alias);
    }
    for (old, name) in OLD_SPELLINGS {
        if name == spec.name {
            arg = arg.alias(old);
        }
    }
    if spec.kind == Kind::Special(Special::Save) {
        // `--save` alone is `save ""` (Redis 7.0.1's rule).
        arg.num_args(0..).default_missing_value("")
    } else if is_multi_arg(spec.kind) {
        arg.num_args(1..)
    } else if spec.has(NO_STATE) {
        arg.num_args(0..=1).default_missing_value("yes")
    } else {
        // One value, which may start with `-` (`--logfile --x`, as redis-server reads it).
        arg.num_args(1).allow_hyphen_values(true)
    }
}

fn value_name(kind: Kind) -> String {
    match kind {
        Kind::Bool => "yes|no".into(),
        Kind::Int { .. } | Kind::UInt { .. } => "N".into(),
        Kind::Memory { .. } | Kind::UMemory { .. } => "BYTES".into(),
        Kind::MemoryOrPercent { .. } => "BYTES|N%".into(),
        Kind::Octal { .. } => "OCTAL".into(),
        Kind::Enum(names) | Kind::Flags(names) => names.join("|"),
        Kind::Str | Kind::Special(Special::Checked) => "VALUE".into(),
        Kind::Special(special) => match special {
            Special::Save => "SECONDS CHANGES",
            Special::ClientOutputBufferLimit => "CLASS HARD SOFT SECONDS",
            Special::OomScoreAdjValues => "N N N",
            Special::NotifyKeyspaceEvents => "CLASSES",
            Special::Bind => "ADDR",
            Special::ReplicaOf => "HOST PORT",
            Special::LatencyPercentiles => "PERCENTILE",
            Special::Dir => "DIR",
            Special::Checked => "VALUE",
        }
        .into(),
    }
}

/// Reads the arguments after the program name; `Err` is clap's (`--help` and `--version`
/// included: see [`clap::Error::kind`]).
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<CommandLine, clap::Error> {
    let args = normalize(args.into_iter().collect());
    let mut command = command();
    let matches = command.try_get_matches_from_mut(std::iter::once(BIN.to_owned()).chain(args))?;
    let config_file = match matches.index_of(CONFIG_FILE) {
        None => None,
        Some(1) => matches.get_one::<String>(CONFIG_FILE).map(PathBuf::from),
        Some(_) => {
            let word = matches.get_one::<String>(CONFIG_FILE).cloned();
            return Err(command.error(
                ErrorKind::UnknownArgument,
                format!(
                    "unexpected argument '{}' found (a configuration file is the first \
                     argument, and this option takes one value)",
                    word.unwrap_or_default()
                ),
            ));
        }
    };
    Ok(CommandLine {
        config_file,
        directives: directives(&matches),
    })
}

/// Every option given, as the directive it stands for, in the command line's order.
fn directives(matches: &ArgMatches) -> Vec<Directive> {
    let mut found: Vec<(usize, Directive)> = Vec::new();
    for id in matches.ids() {
        let id = id.as_str();
        if id == CONFIG_FILE || matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let name = NEGATIONS
            .iter()
            .find(|(flag, _, _)| *flag == id)
            .map_or(id, |(_, name, _)| name);
        let (Some(mut indices), Some(occurrences)) = (
            matches.indices_of(id),
            matches.get_occurrences::<String>(id),
        ) else {
            continue;
        };
        for occurrence in occurrences {
            let args: Vec<String> = occurrence.cloned().collect();
            // Each occurrence has a value (a flag alone gets its default-missing one): the
            // first value's place orders it.
            let at = indices.next().unwrap_or(usize::MAX);
            indices
                .by_ref()
                .take(args.len().saturating_sub(1))
                .for_each(drop);
            let directive = Directive {
                name: name.to_owned(),
                args,
                origin: Origin::CommandLine,
            };
            found.push((at, directive));
        }
    }
    found.sort_by_key(|(at, _)| *at);
    found.into_iter().map(|(_, directive)| directive).collect()
}

/// Redis's rules for the arguments that clap has no word for, applied before it reads them:
/// - `"--port 7000"` as one argument is the option and its value (Redis reads it as a line);
/// - names are case-insensitive (`--PORT`);
/// - a multi-argument option whose words include one starting with `-` (bind's `-::1`, an
///   ACL rule's `-@all`) gets them as one argument, which the loader splits again, since
///   clap would take such a word for a flag.
///
/// An argument right after a one-value option's flag is its value, whatever it looks like.
fn normalize(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut args = args.into_iter().peekable();
    let mut value_next = false;
    while let Some(arg) = args.next() {
        let flag = arg.strip_prefix("--").filter(|_| !value_next);
        value_next = false;
        let Some(flag) = flag else {
            out.push(arg);
            continue;
        };
        let mut words = match split_args(flag) {
            Some(words) if words.len() > 1 => words,
            _ => vec![flag.to_owned()],
        };
        let Some(shape) = shape(&words[0]) else {
            out.push(arg);
            continue;
        };
        let name = words.remove(0).to_ascii_lowercase();
        out.push(format!("--{name}"));
        if shape == Shape::Multi {
            while let Some(next) = args.next_if(|next| !next.starts_with("--")) {
                words.push(next);
            }
            if words.iter().any(|word| word.starts_with('-')) {
                let joined: Vec<String> = words.iter().map(|word| quote(word)).collect();
                words = vec![joined.join(" ")];
            }
        }
        value_next = shape == Shape::One && words.is_empty();
        out.extend(words);
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Takes one value.
    One,
    /// Takes words up to the next flag.
    Multi,
    /// Takes no value, or an optional one that cannot start with `-`.
    Flag,
}

/// How the flag called `name` (any case) takes its values; `None` when there is no such flag.
fn shape(name: &str) -> Option<Shape> {
    let name = name.to_ascii_lowercase();
    let name = OLD_SPELLINGS
        .iter()
        .find(|(old, _)| *old == name)
        .map_or(name.as_str(), |(_, new)| new);
    if OTHER_DIRECTIVES.contains(&name) {
        return Some(Shape::Multi);
    }
    if NEGATIONS.iter().any(|(flag, _, _)| *flag == name) {
        return Some(Shape::Flag);
    }
    if matches!(name, "help" | "version") {
        return Some(Shape::Flag);
    }
    let (_, spec) = table::find(name)?;
    Some(if is_multi_arg(spec.kind) {
        Shape::Multi
    } else if spec.has(NO_STATE) {
        Shape::Flag
    } else {
        Shape::One
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(line: &str) -> Vec<(String, Vec<String>)> {
        words(
            &line
                .split(' ')
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>(),
        )
    }

    fn words(args: &[&str]) -> Vec<(String, Vec<String>)> {
        parse(args.iter().map(|arg| arg.to_string()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .directives
            .into_iter()
            .map(|d| (d.name, d.args))
            .collect()
    }

    fn d(name: &str, args: &[&str]) -> (String, Vec<String>) {
        (name.into(), args.iter().map(|a| a.to_string()).collect())
    }

    fn error(line: &str) -> clap::Error {
        match parse(line.split(' ').filter(|s| !s.is_empty()).map(str::to_owned)) {
            Err(error) => error,
            Ok(parsed) => panic!("{line}: accepted as {parsed:?}"),
        }
    }

    #[test]
    fn the_parser_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn command_line_is_redis_servers() {
        assert_eq!(
            cli("--port 7000 --save 900 1 --loglevel verbose"),
            vec![
                d("port", &["7000"]),
                d("save", &["900", "1"]),
                d("loglevel", &["verbose"])
            ]
        );
        assert_eq!(
            cli("--save --port 1"),
            vec![d("save", &[""]), d("port", &["1"])]
        );
        assert_eq!(
            cli("--port 1 --save"),
            vec![d("port", &["1"]), d("save", &[""])]
        );
        assert_eq!(
            words(&["--save", "", "--save", "3600 1"]),
            vec![d("save", &[""]), d("save", &["3600 1"])]
        );
        // A one-value option's value may start with `--`.
        assert_eq!(
            cli("--proc-title-template --x --loglevel verbose"),
            vec![
                d("proc-title-template", &["--x"]),
                d("loglevel", &["verbose"])
            ]
        );
        assert_eq!(
            cli("--logfile --my--log--file --loglevel --bla"),
            vec![
                d("logfile", &["--my--log--file"]),
                d("loglevel", &["--bla"])
            ]
        );
        assert_eq!(
            cli("--pin --shards 2 --no-pin --aof-fix --fsync always --pin no"),
            vec![
                d("pin", &["yes"]),
                d("shards", &["2"]),
                d("pin", &["no"]),
                d("aof-fix", &["yes"]),
                d("appendfsync", &["always"]),
                d("pin", &["no"])
            ]
        );
        assert_eq!(
            cli("--aof-rewrite-percentage 50 --aof-rewrite-min-size 1mb --slaveof no one"),
            vec![
                d("auto-aof-rewrite-percentage", &["50"]),
                d("auto-aof-rewrite-min-size", &["1mb"]),
                d("replicaof", &["no", "one"])
            ]
        );
        let line = parse(["/etc/r.conf".to_owned(), "--maxmemory 1mb".to_owned()]).unwrap();
        assert_eq!(line.config_file, Some(PathBuf::from("/etc/r.conf")));
        assert_eq!(line.directives[0].args, vec!["1mb".to_owned()]);
        assert_eq!(
            cli("--PORT 1 --Save"),
            vec![d("port", &["1"]), d("save", &[""])]
        );
    }

    #[test]
    fn words_starting_with_a_dash() {
        // A multi-word value with such a word comes as one argument the loader splits again.
        assert_eq!(
            cli("--bind 127.0.0.1 -::1 --port 1"),
            vec![d("bind", &["\"127.0.0.1\" \"-::1\""]), d("port", &["1"])]
        );
        assert_eq!(
            split_args("\"127.0.0.1\" \"-::1\""),
            Some(vec!["127.0.0.1".to_owned(), "-::1".to_owned()])
        );
        assert_eq!(
            cli("--oom-score-adj-values 0 -200 800"),
            vec![d("oom-score-adj-values", &["\"0\" \"-200\" \"800\""])]
        );
        assert_eq!(cli("--port -1"), vec![d("port", &["-1"])]);
    }

    #[test]
    fn clap_answers_help_version_and_mistakes() {
        assert_eq!(error("--help").kind(), ErrorKind::DisplayHelp);
        assert_eq!(error("-h").kind(), ErrorKind::DisplayHelp);
        assert_eq!(error("--version").kind(), ErrorKind::DisplayVersion);
        assert_eq!(error("-v").kind(), ErrorKind::DisplayVersion);
        let unknown = error("--prot 7000");
        assert_eq!(unknown.kind(), ErrorKind::UnknownArgument);
        let text = unknown.render().to_string();
        assert!(
            text.contains("'--prot'") && text.contains("'--port'"),
            "{text}"
        );
        assert_eq!(error("--port").kind(), ErrorKind::InvalidValue);
        // Two values for a one-value option: the second is no configuration file.
        assert_eq!(error("--port 6379 6380").kind(), ErrorKind::UnknownArgument);
        assert_eq!(error("a.conf b.conf").kind(), ErrorKind::UnknownArgument);
    }

    #[test]
    fn help_lists_every_option_with_its_default() {
        let help = command().render_help().to_string();
        for spec in OPTIONS {
            let flag = format!("--{} ", spec.name);
            let line = help
                .lines()
                .find(|line| line.trim_start().starts_with(&flag))
                .unwrap_or_else(|| panic!("{flag} missing:\n{help}"));
            let default = match spec.default {
                text if text.is_empty() || text.contains(' ') => format!("{text:?}"),
                text => text.to_owned(),
            };
            let mut rest = help[help.find(line).unwrap()..].lines();
            let entry: String = std::iter::once(rest.next().unwrap())
                .chain(rest.take_while(|l| !l.trim_start().starts_with("--")))
                .collect();
            assert!(
                entry.contains(&format!("[default: {default}]")),
                "{}: {entry}",
                spec.name
            );
        }
    }
}
