//! Every configuration option, once: its Redis name (and alias), kind, default, flags, what it
//! does here and how it fills [`ServerConfig`](crate::server::ServerConfig) at start-up. The configuration file, the
//! command line (`--name value`), CONFIG GET/SET/REWRITE and `--help` all read this table.
//!
//! Redis 7.0's options (`config.c`'s `static_configs`, TLS aside: this server has no TLS) are
//! all here, so tools and test harnesses that read or set them keep working. What each does
//! here is its [`Effect`]: applied at start, applied at run time, or [`Effect::Inert`] (a
//! Redis feature this server does not have, or a tuning knob of Redis's internals): such an
//! option is accepted at its default value and reported; a start-up configuration that sets
//! one to anything else fails, listing them (see [`super::load`]), rather than be ignored.
//! corewire's own options (`shards`, `binary-port`, ...) are marked [`OURS`].

use super::value::Kind;

pub use super::options::OPTIONS;

/// Redis's `IMMUTABLE_CONFIG`: fixed once the server runs (in Redis too).
pub const IMMUTABLE: u16 = 1;
/// Redis's `HIDDEN_CONFIG`: CONFIG GET shows it only when asked by its exact name.
pub const HIDDEN: u16 = 2;
/// Redis's `SENSITIVE_CONFIG`: redacted in SLOWLOG and MONITOR.
pub const SENSITIVE: u16 = 4;
/// corewire's own option (not Redis's): `--help` lists these first.
pub const OURS: u16 = 8;

/// A [`super::value::Special::Checked`] option's validation: the value as kept, or the error's text.
pub type Check = fn(&str) -> Result<String, String>;
/// A flag corewire's command line also takes alone (`--pin`, `--no-pin`, `--aof-fix`): see
/// [`super::cli`].
pub const NO_STATE: u16 = 16;
/// Asks for a behaviour this server does not have unless left at its default (RDB
/// snapshots, daemonizing, replication, ...): another value at start-up is an error.
pub const STRICT: u16 = 32;

/// What an option does in this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Read at start-up only. CONFIG SET of its current value is accepted (a no-op); another
    /// value is refused, as Redis refuses an immutable option.
    Start,
    /// Changes what the running server does (see [`super::live`]).
    Live(LiveKey),
    /// Reported, with no effect: see the module comment.
    Inert,
}

/// The options CONFIG SET applies to the running server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveKey {
    MaxMemory,
    MaxMemoryPolicy,
    MaxClients,
    MaxMemorySamples,
    NotifyKeyspaceEvents,
    SlowlogSlowerThan,
    SlowlogMaxLen,
    /// `min-replicas-to-write`: what the write path checks, from the CONFIG SET on.
    MinReplicasToWrite,
    LatencyMonitorThreshold,
    LatencyTracking,
    LatencyPercentiles,
    TrackingTableMaxKeys,
    /// The listpack/intset thresholds OBJECT ENCODING reports against.
    Encoding,
    ClientOutputBufferLimit,
    RequirePass,
    Timeout,
    LogLevel,
    /// `busy-reply-threshold`: copied to the scripts' busy state by the session config.
    BusyReplyThreshold,
    ProtectedMode,
    /// A `tls-*` parameter: applied by the TLS reload (see `LiveConfig::config_set_with`).
    Tls,
    /// `save`, `dbfilename`, `rdbcompression`, `rdbchecksum`: read by each save when it
    /// starts (see `server/rdb_save.rs`).
    Persistence,
}

/// Fills the start-up configuration from the option's canonical value.
pub type Setter = fn(&mut super::load::Startup, &str) -> Result<(), String>;

#[derive(Debug)]
pub struct OptionSpec {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub kind: Kind,
    /// The canonical default (what CONFIG GET shows when nothing set it).
    pub default: &'static str,
    pub flags: u16,
    pub effect: Effect,
    pub setter: Option<Setter>,
    /// For [`super::value::Special::Checked`] options: validates (and may canonicalise) a value.
    pub check: Option<Check>,
    /// `--help`'s line (corewire's options, and Redis's that change what this server does).
    pub help: &'static str,
}

impl OptionSpec {
    pub fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
            || self
                .alias
                .is_some_and(|alias| alias.eq_ignore_ascii_case(name))
    }

    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    /// Reads `args` as this option's value: its canonical text, or why not.
    pub fn parse(&self, args: &[String]) -> Result<String, String> {
        let value = super::value::parse(self.kind, args)?;
        match self.check {
            Some(check) => check(&value),
            None => Ok(value),
        }
    }
}

pub(super) const fn opt(name: &'static str, kind: Kind, default: &'static str) -> OptionSpec {
    OptionSpec {
        name,
        alias: None,
        kind,
        default,
        flags: 0,
        effect: Effect::Inert,
        setter: None,
        check: None,
        help: "",
    }
}

impl OptionSpec {
    pub(super) const fn alias(mut self, alias: &'static str) -> Self {
        self.alias = Some(alias);
        self
    }
    pub(super) const fn flags(mut self, flags: u16) -> Self {
        self.flags |= flags;
        self
    }
    pub(super) const fn live(mut self, key: LiveKey) -> Self {
        self.effect = Effect::Live(key);
        self
    }
    pub(super) const fn start(mut self, setter: Setter) -> Self {
        self.effect = Effect::Start;
        self.setter = Some(setter);
        self
    }
    /// Applied at start-up by `setter` and at run time as `key`.
    pub(super) const fn both(mut self, setter: Setter, key: LiveKey) -> Self {
        self.effect = Effect::Live(key);
        self.setter = Some(setter);
        self
    }
    pub(super) const fn check(mut self, check: fn(&str) -> Result<String, String>) -> Self {
        self.check = Some(check);
        self
    }
    pub(super) const fn help(mut self, help: &'static str) -> Self {
        self.help = help;
        self
    }
}

/// The option called `name` (or aliased so), case-insensitively.
pub fn find(name: &str) -> Option<(usize, &'static OptionSpec)> {
    OPTIONS.iter().enumerate().find(|(_, spec)| spec.is(name))
}

/// Directives Redis knows that this server does not support at all (they fail at start-up
/// with this reason, rather than as unknown).
pub fn unsupported_directive(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    let reason = match name.as_str() {
        "rename-command" => "renaming commands is not supported",
        "loadmodule" => "modules are not supported",
        "sentinel" => "Sentinel is not supported",
        _ => return None,
    };
    Some(reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_defaults_parse() {
        for (i, spec) in OPTIONS.iter().enumerate() {
            assert_eq!(spec.name, spec.name.to_ascii_lowercase());
            for other in &OPTIONS[i + 1..] {
                assert!(!other.is(spec.name), "{} twice", spec.name);
                if let Some(alias) = spec.alias {
                    assert!(!other.is(alias), "{alias} twice");
                }
            }
            if spec.kind == Kind::Special(super::super::value::Special::Dir) || spec.has(NO_STATE) {
                continue;
            }
            let args: Vec<String> = if super::super::value::is_multi_arg(spec.kind) {
                match spec.default {
                    "" => vec![String::new()],
                    text => text.split(' ').map(str::to_owned).collect(),
                }
            } else {
                vec![spec.default.to_owned()]
            };
            assert_eq!(
                spec.parse(&args).as_deref(),
                Ok(spec.default),
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn lookup_by_alias() {
        assert_eq!(find("SLAVEOF").unwrap().1.name, "replicaof");
        assert_eq!(
            find("hash-max-ziplist-entries").unwrap().1.name,
            "hash-max-listpack-entries"
        );
        assert!(find("nosuch").is_none());
        assert!(unsupported_directive("tls-port").is_none());
        assert!(unsupported_directive("port").is_none());
    }
}
