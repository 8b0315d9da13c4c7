//! The `benchctl` command line.

use std::path::PathBuf;
use std::time::Duration;

use super::catalog::{default_vars, Catalog};
use super::plan::{Plan, RunConfig};
use super::suite::{self, SuiteOptions};
use super::template::Vars;

/// benchctl's flags. Every one but the template ones (--server, --client, --var, --bin-dir)
/// is a suite's, which `benchctl list` does not read.
#[derive(Debug, clap::Parser)]
#[command(
    name = "benchctl",
    about = "Runs a benchmark suite: each (workload, variant) in rounds, a table of medians",
    after_help = "Suites: echo, percore, scaling, fairness, accept, rpc; `benchctl list` shows the \
                  built-in server templates and variables.",
    args_override_self = true
)]
pub struct Cli {
    /// echo | percore | scaling | fairness | accept | rpc, or list.
    pub suite: String,
    /// Measurements per (workload, variant); the table shows medians (default 5).
    #[arg(long, value_name = "N")]
    pub rounds: Option<usize>,
    /// Variants to compare, comma-separated (echo: corewire,tokio,glommio; percore:
    /// corewire,corewire-epoll,tokio-ct,monoio,glommio-1,floor; rpc:
    /// corewire-rpc,tonic,corewire-raw; fairness: first one, corewire-rpc (corewire: the raw
    /// echo example, one listener); accept: first one, corewire).
    #[arg(long, value_name = "A,B,...")]
    pub servers: Option<String>,
    /// Ratio baseline (echo: tokio, percore: tokio-ct (+ monoio, floor), rpc: tonic,
    /// fairness: budget=unlimited, accept: accept=reuseport).
    #[arg(long, value_name = "LABEL")]
    pub baseline: Option<String>,
    /// Define or override a server command (repeatable).
    #[arg(long, value_name = "NAME=TEMPLATE")]
    pub server: Vec<String>,
    /// Closed-loop client for NAME (repeatable; default: loadgen).
    #[arg(long, value_name = "NAME=TEMPLATE")]
    pub client: Vec<String>,
    /// Extra or overridden template variable (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub var: Vec<String>,
    /// Where loadgen, echo_tokio, ... live (default: benchctl's folder).
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<String>,
    /// Pin servers with `taskset -c LIST` (default: unpinned).
    #[arg(long, value_name = "LIST")]
    pub server_cpus: Option<String>,
    /// Pin clients with `taskset -c LIST` (default: unpinned).
    #[arg(long, value_name = "LIST")]
    pub client_cpus: Option<String>,
    /// Measured window (default 3000).
    #[arg(long, value_name = "MS")]
    pub duration_ms: Option<u64>,
    /// Warm-up before it (default 1000).
    #[arg(long, value_name = "MS")]
    pub warmup_ms: Option<u64>,
    /// Pause between measurements (default 150).
    #[arg(long, value_name = "MS")]
    pub settle_ms: Option<u64>,
    /// Client threads (default 1).
    #[arg(long, value_name = "T")]
    pub threads: Option<usize>,
    /// First port; each measurement takes the next free one (default 20000).
    #[arg(long, value_name = "P")]
    pub port_base: Option<u16>,
    /// Server shards (default 2).
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// Server worker threads (default 2).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Message size (default: the suite's).
    #[arg(long, value_name = "S")]
    pub size: Option<usize>,
    /// Fairness: budgets to compare (default unlimited,64,32,16,4).
    #[arg(long, value_name = "LIST")]
    pub budgets: Option<String>,
    /// Fairness: a byte budget as well.
    #[arg(long, value_name = "N")]
    pub budget_bytes: Option<u64>,
    /// Fairness: hot connections (default 8).
    #[arg(long, value_name = "N")]
    pub hot_conns: Option<usize>,
    /// Fairness: requests in flight per hot connection (default 32).
    #[arg(long, value_name = "N")]
    pub hot_depth: Option<usize>,
    /// Fairness: the probe's message size (default 64).
    #[arg(long, value_name = "S")]
    pub probe_size: Option<usize>,
    /// Fairness: the corewire RPC handler's cost, FNV-1a passes over each payload (0: plain
    /// echo; default 32).
    #[arg(long, value_name = "N")]
    pub hash_rounds: Option<u32>,
    /// Accept: modes to compare (default reuseport,handoff).
    #[arg(long, value_name = "LIST")]
    pub accept_modes: Option<String>,
    /// Accept: connect-echo-close cycles (default 20000).
    #[arg(long, value_name = "N")]
    pub cycles: Option<u64>,
    /// Only workloads whose label contains TEXT (repeatable; e.g. --workload '1 conn').
    #[arg(long, value_name = "TEXT")]
    pub workload: Vec<String>,
    /// Percore: loadgen counts the server's io_uring enters and syscalls per request with
    /// perf stat (perturbs timing).
    #[arg(long)]
    pub syscalls: bool,
    /// Append every measurement as a JSON line.
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,
    /// Print the commands and exit.
    #[arg(long)]
    pub dry_run: bool,
}

/// What to do.
#[derive(Debug)]
pub enum Command {
    List {
        catalog: Catalog,
        vars: Vars,
    },
    Run {
        plan: Box<Plan>,
        json_out: Option<PathBuf>,
        dry_run: bool,
    },
}

/// A command-line error.
#[derive(Debug)]
pub enum CliError {
    Suite(suite::SuiteError),
    BadPair { flag: &'static str, value: String },
    UnknownClientServer(String),
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Suite(e) => write!(f, "{e}"),
            CliError::BadPair { flag, value } => {
                write!(f, "--{flag} expects NAME=VALUE, got {value:?}")
            }
            CliError::UnknownClientServer(n) => {
                write!(
                    f,
                    "--client {n}=…: define the server first with --server {n}=…"
                )
            }
        }
    }
}

impl std::error::Error for CliError {}

fn pairs(values: &[String], flag: &'static str) -> Result<Vec<(String, String)>, CliError> {
    values
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(CliError::BadPair {
                flag,
                value: p.clone(),
            }),
        })
        .collect()
}

fn list(raw: Option<String>) -> Option<Vec<String>> {
    raw.map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect()
    })
}

/// What benchctl's flags ask; `exe_dir` is the default `--bin-dir`.
pub fn parse(cli: Cli, exe_dir: &str) -> Result<Command, CliError> {
    let bin_dir = cli.bin_dir.clone().unwrap_or_else(|| exe_dir.to_string());
    let mut catalog = Catalog::builtin();
    for (name, tpl) in pairs(&cli.server, "server")? {
        catalog.set_server(&name, &tpl);
    }
    for (name, tpl) in pairs(&cli.client, "client")? {
        if !catalog.set_client(&name, &tpl) {
            return Err(CliError::UnknownClientServer(name));
        }
    }
    let mut vars = default_vars(&bin_dir);
    vars.extend(pairs(&cli.var, "var")?);
    if cli.suite == "list" {
        return Ok(Command::List { catalog, vars });
    }

    let defaults = SuiteOptions::default();
    let opts = SuiteOptions {
        servers: list(cli.servers),
        baseline: cli.baseline,
        shards: cli.shards.unwrap_or(defaults.shards),
        workers: cli.workers.unwrap_or(defaults.workers),
        size: cli.size,
        budgets: list(cli.budgets).unwrap_or(defaults.budgets),
        budget_bytes: cli.budget_bytes,
        accept_modes: list(cli.accept_modes).unwrap_or(defaults.accept_modes),
        cycles: cli.cycles.unwrap_or(defaults.cycles),
        hot_conns: cli.hot_conns.unwrap_or(defaults.hot_conns),
        hot_depth: cli.hot_depth.unwrap_or(defaults.hot_depth),
        probe_size: cli.probe_size.unwrap_or(defaults.probe_size),
        hash_rounds: cli.hash_rounds.unwrap_or(defaults.hash_rounds),
        // Repeatable, not a comma list: workload labels contain commas.
        workloads: Some(cli.workload).filter(|w| !w.is_empty()),
        count_syscalls: cli.syscalls,
    };
    let d = RunConfig::default();
    let cfg = RunConfig {
        rounds: cli.rounds.unwrap_or(d.rounds).max(1),
        port_base: cli.port_base.unwrap_or(d.port_base),
        server_cpus: cli.server_cpus,
        client_cpus: cli.client_cpus,
        duration_ms: cli.duration_ms.unwrap_or(d.duration_ms),
        warmup_ms: cli.warmup_ms.unwrap_or(d.warmup_ms),
        threads: cli.threads.unwrap_or(d.threads).max(1),
        settle: cli.settle_ms.map_or(d.settle, Duration::from_millis),
        ..d
    };
    let suite = suite::build(&cli.suite, &opts).map_err(CliError::Suite)?;
    Ok(Command::Run {
        plan: Box::new(Plan {
            suite,
            catalog,
            vars,
            cfg,
        }),
        json_out: cli.json_out,
        dry_run: cli.dry_run,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use clap::Parser;

    fn parse_words(words: &[&str]) -> Result<Command, CliError> {
        let cli = Cli::try_parse_from(std::iter::once("benchctl").chain(words.iter().copied()))
            .unwrap_or_else(|e| panic!("{words:?}: {e}"));
        parse(cli, "/exe")
    }

    #[test]
    fn the_parser_is_consistent() {
        <Cli as clap::CommandFactory>::command().debug_assert();
    }

    #[test]
    fn plugs_in_servers_clients_and_vars() {
        let cmd = parse_words(&[
            "rpc",
            "--server",
            "mine=srv --addr {addr} --x {foo}",
            "--client",
            "mine=cli --addr {addr}",
            "--var",
            "foo=bar",
            "--servers",
            "mine,tonic",
            "--rounds",
            "3",
            "--client-cpus",
            "0",
            "--dry-run",
        ])
        .unwrap();
        let Command::Run { plan, dry_run, .. } = cmd else {
            panic!("expected a run");
        };
        assert!(dry_run);
        assert_eq!(plan.cfg.rounds, 3);
        assert_eq!(
            plan.server_command(0, 0, 5).unwrap(),
            "srv --addr 127.0.0.1:5 --x bar"
        );
        assert_eq!(
            plan.client_command(0, 0, 5, "9").unwrap(),
            "taskset -c 0 cli --addr 127.0.0.1:5"
        );
        assert_eq!(plan.vars["bin"], "/exe");
    }

    #[test]
    fn workload_filter_is_repeatable_and_keeps_commas() {
        let cmd = parse_words(&[
            "echo",
            "--workload",
            "1 conn × depth 1, 64 B",
            "--workload",
            "64 conn",
        ])
        .unwrap();
        let Command::Run { plan, .. } = cmd else {
            panic!("expected a run");
        };
        let labels: Vec<_> = plan.suite.workloads.iter().map(|w| w.label()).collect();
        assert_eq!(
            labels,
            ["1 conn × depth 1, 64 B", "64 conn × depth 4, 64 B"]
        );
    }

    #[test]
    fn rejects_bad_input() {
        assert!(matches!(
            parse_words(&["echo", "--var", "novalue"]),
            Err(CliError::BadPair { .. })
        ));
        assert!(matches!(
            parse_words(&["echo", "--client", "ghost=x"]),
            Err(CliError::UnknownClientServer(_))
        ));
        assert!(matches!(parse_words(&["bogus"]), Err(CliError::Suite(_))));
        let typo = Cli::try_parse_from(["benchctl", "echo", "--roundz", "1"]).unwrap_err();
        assert!(typo.to_string().contains("'--rounds'"), "{typo}");
        assert!(matches!(parse_words(&["list"]), Ok(Command::List { .. })));
    }
}
