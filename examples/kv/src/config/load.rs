//! Start-up: the configuration file and the command line, read into every option's value
//! (see [`super::table`]) and then into the [`ServerConfig`] the server starts with.
//!
//! Every problem is collected and reported together: unknown directives, directives Redis has
//! that this server does not support, bad values, and options that ask for a behaviour this
//! server lacks ([`super::table::STRICT`]). Options accepted with no effect here and set to
//! something other than their default are listed in [`Loaded::notes`], so nothing is ignored
//! silently.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

use super::cli;
use super::file::{self, Directive};
use super::table::{self, Effect, OPTIONS, STRICT};
use super::value::{is_multi_arg, Kind, OutputBufferLimits, Special};
use crate::aof::{FsyncPolicy, LoadPolicy, RewritePolicy, MAX_PAYLOAD_LEN};
use crate::server::config::{AofConfig, ClusterConfig, ConfigError, ServerConfig};

/// Every option's current value, as CONFIG GET shows it, in the table's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Values(Vec<String>);

impl Default for Values {
    fn default() -> Self {
        Values(OPTIONS.iter().map(|spec| spec.default.to_owned()).collect())
    }
}

impl Values {
    pub fn get(&self, index: usize) -> &str {
        &self.0[index]
    }

    /// The value of the option called `name` (or aliased so).
    pub fn named(&self, name: &str) -> Option<&str> {
        table::find(name).map(|(index, _)| self.get(index))
    }

    pub fn set(&mut self, index: usize, value: String) {
        self.0[index] = value;
    }

    /// Sets the option called `name`, which must exist (a programming error otherwise).
    pub fn set_named(&mut self, name: &str, value: impl Into<String>) {
        match table::find(name) {
            Some((index, _)) => self.0[index] = value.into(),
            None => tracing::error!(name, "no such option"),
        }
    }
}

/// What start-up fills before the [`ServerConfig`] exists: the Redis-style AOF and cluster
/// options that together make `ServerConfig::aof` and `ServerConfig::cluster`.
#[derive(Debug, Clone)]
pub struct Startup {
    pub server: ServerConfig,
    pub appendonly: bool,
    pub aof_dir: Option<PathBuf>,
    pub appenddirname: PathBuf,
    pub dir: PathBuf,
    pub fsync: FsyncPolicy,
    pub aof_load: LoadPolicy,
    pub aof_rewrite: RewritePolicy,
    pub aof_max_record_bytes: u64,
    pub cluster_enabled: bool,
    pub cluster: ClusterConfig,
}

impl Deref for Startup {
    type Target = ServerConfig;
    fn deref(&self) -> &ServerConfig {
        &self.server
    }
}

impl DerefMut for Startup {
    fn deref_mut(&mut self) -> &mut ServerConfig {
        &mut self.server
    }
}

impl Default for Startup {
    fn default() -> Self {
        Startup {
            server: ServerConfig::default(),
            appendonly: false,
            aof_dir: None,
            appenddirname: PathBuf::from("appendonlydir"),
            dir: PathBuf::new(),
            fsync: FsyncPolicy::EverySec,
            aof_load: LoadPolicy::default(),
            aof_rewrite: RewritePolicy::default(),
            aof_max_record_bytes: MAX_PAYLOAD_LEN,
            cluster_enabled: false,
            cluster: ClusterConfig::default(),
        }
    }
}

/// The result of reading the configuration.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: ServerConfig,
    /// Options set to something other than their default that do nothing here.
    pub notes: Vec<String>,
}

/// Reads the command line (and the configuration file it names) into the server's settings.
pub fn from_args<I: IntoIterator<Item = String>>(args: I) -> Result<Loaded, ConfigError> {
    let line = cli::parse(args).map_err(|error| {
        let text = error.render().to_string();
        if error.use_stderr() {
            ConfigError::CommandLine(text)
        } else {
            ConfigError::Info(text)
        }
    })?;
    let mut directives = Vec::new();
    let config_file = match &line.config_file {
        Some(path) => {
            file::read_file(path, &mut directives)
                .map_err(|e| ConfigError::Problems(vec![e.to_string()]))?;
            Some(absolute(path))
        }
        None => None,
    };
    directives.extend(line.directives);
    let mut loaded = from_directives(&directives)?;
    loaded.config.config_file = config_file;
    Ok(loaded)
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// Applies `directives` in order over the defaults.
pub fn from_directives(directives: &[Directive]) -> Result<Loaded, ConfigError> {
    let mut values = Values::default();
    let mut problems = Vec::new();
    let mut save_seen = false;
    for directive in directives {
        if let Err(why) = apply(&mut values, directive, &mut save_seen) {
            problems.push(format!("{}: '{}': {why}", directive.origin, directive.name));
        }
    }
    let mut notes = Vec::new();
    for (index, spec) in OPTIONS.iter().enumerate() {
        let value = values.get(index);
        if value == spec.default || spec.effect != Effect::Inert {
            continue;
        }
        if spec.has(STRICT) {
            problems.push(format!(
                "'{} {}': not supported by corewire-kv (only its default, {:?}, is)",
                spec.name, value, spec.default
            ));
        } else {
            notes.push(spec.name.to_owned());
        }
    }
    let mut startup = Startup::default();
    for (index, spec) in OPTIONS.iter().enumerate() {
        if let Some(setter) = spec.setter {
            if let Err(why) = setter(&mut startup, values.get(index)) {
                problems.push(format!("'{}': {why}", spec.name));
            }
        }
    }
    if !problems.is_empty() {
        return Err(ConfigError::Problems(problems));
    }
    let mut config = finish(startup).map_err(|why| ConfigError::Problems(vec![why]))?;
    values.set_named("dir", config.dir.display().to_string());
    config.options = values;
    Ok(Loaded { config, notes })
}

/// One directive over `values`.
fn apply(values: &mut Values, directive: &Directive, save_seen: &mut bool) -> Result<(), String> {
    let Some((index, spec)) = table::find(&directive.name) else {
        return Err(match table::unsupported_directive(&directive.name) {
            Some(reason) => format!("not supported by corewire-kv: {reason}"),
            None => "Bad directive or wrong number of arguments".into(),
        });
    };
    let multi = is_multi_arg(spec.kind);
    if !multi && directive.args.len() != 1 {
        return Err("wrong number of arguments".into());
    }
    // `--save "900 1"`: a multi-argument option given as one argument is split again.
    let split;
    let args: &[String] = match &directive.args[..] {
        [one] if multi && !one.is_empty() => {
            split = file::split_args(one).ok_or("Unbalanced quotes")?;
            &split
        }
        args => args,
    };
    let value = match spec.kind {
        // The file's `save` lines add up: the first replaces the default, `save ""` clears.
        Kind::Special(Special::Save) => {
            let parsed = spec.parse(args)?;
            let previous = values.get(index);
            if !*save_seen || parsed.is_empty() || previous.is_empty() {
                *save_seen = true;
                parsed
            } else {
                format!("{previous} {parsed}")
            }
        }
        // Each line sets the classes it names.
        Kind::Special(Special::ClientOutputBufferLimit) => {
            let mut limits = OutputBufferLimits::parse(values.get(index)).unwrap_or_default();
            limits.update(args)?;
            limits.to_string()
        }
        _ => spec.parse(args)?,
    };
    values.set(index, value);
    Ok(())
}

/// The AOF and cluster settings from their options; relative paths are taken from `dir`, as
/// Redis takes them after changing to it.
fn finish(startup: Startup) -> Result<ServerConfig, String> {
    let Startup {
        mut server,
        appendonly,
        aof_dir,
        appenddirname,
        dir,
        fsync,
        aof_load,
        aof_rewrite,
        aof_max_record_bytes,
        cluster_enabled,
        mut cluster,
    } = startup;
    let dir = if dir.as_os_str().is_empty() {
        std::env::current_dir().map_err(|e| format!("the working directory: {e}"))?
    } else {
        if !dir.is_dir() {
            return Err(format!("dir '{}': not a directory", dir.display()));
        }
        absolute(&dir)
    };
    let within = |path: PathBuf| {
        if path.is_absolute() {
            path
        } else {
            dir.join(path)
        }
    };
    let aof_dir = match aof_dir {
        Some(path) => Some(path),
        None if appendonly => Some(within(appenddirname)),
        None => None,
    };
    server.aof = aof_dir.map(|path| AofConfig {
        load: aof_load,
        max_record_bytes: aof_max_record_bytes,
        rewrite: aof_rewrite,
        ..AofConfig::new(path, fsync)
    });
    if cluster_enabled {
        cluster.config_file = within(cluster.config_file);
        server.cluster = Some(cluster);
    }
    server.pidfile = server.pidfile.take().map(within);
    server.logfile = server.logfile.take().map(within);
    server.dir = dir;
    Ok(server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::config::AcceptChoice;

    fn load(line: &str) -> Result<Loaded, ConfigError> {
        from_args(line.split_whitespace().map(str::to_owned))
    }

    fn problems(line: &str) -> Vec<String> {
        match load(line) {
            Err(ConfigError::Problems(list)) => list,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn todays_flags_keep_working() {
        let config = load(
            "--shards 3 --port 0 --bind 0.0.0.0 --binary-port 7000 --aof /tmp/x --fsync always \
             --requirepass pw --maxclients 5 --accept reuseport --proto-max-bulk-len 1048576 \
             --max-backlog 16 --max-pending-output 4096 --rdma 10.0.0.1:7471 --pin --aof-fix \
             --budget unlimited --pubsub-output-limit 100:10:1",
        )
        .unwrap()
        .config;
        assert_eq!(config.shards, 3);
        assert_eq!(config.port, 0);
        assert_eq!(config.binary_addr().unwrap().to_string(), "0.0.0.0:7000");
        let aof = config.aof.clone().unwrap();
        assert_eq!(aof.dir, PathBuf::from("/tmp/x"));
        assert_eq!(aof.fsync, FsyncPolicy::Always);
        assert!(aof.load.fix);
        assert_eq!(config.requirepass.as_deref(), Some("pw"));
        assert_eq!(config.maxclients, 5);
        assert_eq!(config.accept, AcceptChoice::ReusePort);
        assert_eq!(config.parser_limits.max_bulk_len, 1 << 20);
        assert_eq!((config.max_backlog, config.max_pending_output), (16, 4096));
        assert_eq!(config.rdma, Some("10.0.0.1:7471".parse().unwrap()));
        assert_eq!(config.pin, Some(true));
        assert_eq!(config.conn_budget, corewire::runtime::Budget::UNLIMITED);
        assert_eq!(config.pubsub_output_limit.soft_ms, 1000);
        assert_eq!(config.options.named("port"), Some("0"));
        assert_eq!(config.options.named("appendfsync"), Some("always"));
    }

    #[test]
    fn redis_names_and_units() {
        let config = load(
            "--maxmemory 1gb --maxmemory-policy allkeys-lru --appendonly yes --appendfsync no \
             --auto-aof-rewrite-min-size 64kb --cluster-enabled yes --cluster-port 9 \
             --client-output-buffer-limit pubsub 1mb 0 0 --notify-keyspace-events KEA",
        )
        .unwrap()
        .config;
        assert_eq!(config.maxmemory, 1 << 30);
        assert_eq!(config.options.named("maxmemory"), Some("1073741824"));
        let aof = config.aof.clone().unwrap();
        assert!(aof.dir.ends_with("appendonlydir") && aof.dir.is_absolute());
        assert_eq!(aof.fsync, FsyncPolicy::No);
        assert_eq!(aof.rewrite.min_size, 64 << 10);
        assert_eq!(config.cluster.clone().unwrap().bus_port, Some(9));
        assert_eq!(config.pubsub_output_limit.hard, 1 << 20);
        assert_eq!(config.options.named("notify-keyspace-events"), Some("AKE"));
    }

    #[test]
    fn every_problem_is_reported() {
        let list = problems("--port x --loadmodule m.so --daemonize yes --save 900 1");
        assert_eq!(list.len(), 3, "{list:?}");
        assert!(list[0].contains("'port': argument couldn't be parsed into an integer"));
        assert!(list[1].contains("modules are not supported"));
        assert!(list
            .iter()
            .any(|p| p.contains("'daemonize yes': not supported")));
        assert!(problems("--shards 0")[0].contains("'shards': argument must be a positive"));
        assert!(matches!(load("--help"), Err(ConfigError::Info(_))));
        // An unknown flag is the command line's error (clap's, with a suggestion).
        assert!(
            matches!(load("--nosuch 1"), Err(ConfigError::CommandLine(m)) if m.contains("--nosuch"))
        );
    }

    #[test]
    fn harmless_options_are_noted() {
        let loaded = load("--hz 100 --always-show-logo yes --save 900 1 --save").unwrap();
        assert_eq!(loaded.notes, vec!["always-show-logo", "hz"]);
        assert_eq!(loaded.config.options.named("save"), Some(""));
    }

    #[test]
    fn a_file_then_the_command_line() {
        let dir = std::env::temp_dir().join(format!("kv-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("redis.conf");
        std::fs::write(
            &path,
            "port 7001\nsave 900 1\nsave 300 10\nlogfile ''\ndatabases 16\n\
             maxmemory-policy volatile-lru\nclient-output-buffer-limit normal 1mb 0 0\n",
        )
        .unwrap();
        let args = [path.display().to_string(), "--save".into(), "".into()];
        let loaded = from_args(args).unwrap();
        assert_eq!(loaded.config.port, 7001);
        assert_eq!(loaded.config.config_file.as_deref(), Some(path.as_path()));
        let values = &loaded.config.options;
        assert_eq!(values.named("save"), Some(""));
        assert_eq!(values.named("maxmemory-policy"), Some("volatile-lru"));
        assert!(values
            .named("client-output-buffer-limit")
            .unwrap()
            .starts_with("normal 1048576 0 0 slave"));
        // Without the reset the file's `save` lines add up.
        let loaded = from_args([path.display().to_string()]).unwrap();
        assert_eq!(loaded.config.options.named("save"), Some("900 1 300 10"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
