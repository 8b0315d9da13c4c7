//! The `benchctl` command line.

use std::path::PathBuf;
use std::time::Duration;

use super::catalog::{default_vars, Catalog};
use super::plan::{Plan, RunConfig};
use super::suite::{self, SuiteOptions};
use super::template::Vars;
use crate::args::{Args, ArgsError};

/// Usage text.
pub const USAGE: &str = "\
benchctl SUITE [options]      SUITE: echo | percore | fairness | accept | rpc
benchctl list                 show built-in server templates and variables

  --rounds N (5)              measurements per (workload, variant); table shows medians
  --servers A,B,...           variants to compare (echo: corewire,tokio,glommio;
                              percore: corewire,corewire-epoll,tokio-ct,monoio,glommio-1,floor;
                              rpc: corewire-rpc,tonic,corewire-raw;
                              fairness: first one, corewire-rpc (corewire: the raw echo
                              example, one listener); accept: first one, corewire)
  --baseline LABEL            ratio baseline (echo: tokio, percore: tokio-ct (+ monoio,
                              floor), rpc: tonic,
                              fairness: budget=unlimited, accept: accept=reuseport)
  --server NAME=TEMPLATE      define/override a server command (repeatable)
  --client NAME=TEMPLATE      closed-loop client for NAME (repeatable; default: loadgen)
  --var KEY=VALUE             extra/overridden template variable (repeatable)
  --bin-dir DIR               where loadgen/echo_tokio/... live (default: benchctl's dir)
  --server-cpus LIST          pin servers with `taskset -c LIST` (default: unpinned)
  --client-cpus LIST          pin clients with `taskset -c LIST` (default: unpinned)
  --duration-ms MS (3000)     measured window;  --warmup-ms MS (1000)
  --threads T (1)             client threads
  --port-base P (20000)       first port; each measurement takes the next free one
  --shards N (2)  --workers N (2)  --size S (64)
  --budgets LIST (unlimited,64,32,16,4)  --budget-bytes N      (fairness)
  --hot-conns N (8)  --hot-depth N (32)  --probe-size S (64)    (fairness)
  --hash-rounds N (32)        fairness: the corewire RPC handler's cost, FNV-1a passes over
                              each payload (0: plain echo)
  --accept-modes LIST (reuseport,handoff)  --cycles N (20000)   (accept)
  --workload TEXT             only workloads whose label contains TEXT (repeatable;
                              e.g. --workload '1 conn')
  --syscalls                  percore: loadgen counts the server's io_uring enters and
                              syscalls per request with perf stat (perturbs timing)
  --json-out FILE             append every measurement as a JSON line
  --dry-run                   print the commands and exit";

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
    Args(ArgsError),
    Suite(suite::SuiteError),
    BadPair { flag: &'static str, value: String },
    UnknownClientServer(String),
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Args(e) => write!(f, "{e}"),
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

impl From<ArgsError> for CliError {
    fn from(e: ArgsError) -> Self {
        CliError::Args(e)
    }
}

fn pairs(args: &mut Args, flag: &'static str) -> Result<Vec<(String, String)>, CliError> {
    args.take_all(flag)?
        .into_iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(CliError::BadPair { flag, value: p }),
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

/// Parses benchctl's arguments; `exe_dir` is the default `--bin-dir`.
pub fn parse(mut args: Args, exe_dir: &str) -> Result<Command, CliError> {
    let what = args
        .take_positional()
        .ok_or_else(|| ArgsError::Missing("SUITE".into()))?;
    let bin_dir: String = args.get("bin-dir", exe_dir.to_string())?;
    let mut catalog = Catalog::builtin();
    for (name, tpl) in pairs(&mut args, "server")? {
        catalog.set_server(&name, &tpl);
    }
    for (name, tpl) in pairs(&mut args, "client")? {
        if !catalog.set_client(&name, &tpl) {
            return Err(CliError::UnknownClientServer(name));
        }
    }
    let mut vars = default_vars(&bin_dir);
    vars.extend(pairs(&mut args, "var")?);
    if what == "list" {
        args.finish()?;
        return Ok(Command::List { catalog, vars });
    }

    let defaults = SuiteOptions::default();
    let opts = SuiteOptions {
        servers: list(args.opt("servers")?),
        baseline: args.opt("baseline")?,
        shards: args.get("shards", defaults.shards)?,
        workers: args.get("workers", defaults.workers)?,
        size: args.opt("size")?,
        budgets: list(args.opt("budgets")?).unwrap_or(defaults.budgets),
        budget_bytes: args.opt("budget-bytes")?,
        accept_modes: list(args.opt("accept-modes")?).unwrap_or(defaults.accept_modes),
        cycles: args.get("cycles", defaults.cycles)?,
        hot_conns: args.get("hot-conns", defaults.hot_conns)?,
        hot_depth: args.get("hot-depth", defaults.hot_depth)?,
        probe_size: args.get("probe-size", defaults.probe_size)?,
        hash_rounds: args.get("hash-rounds", defaults.hash_rounds)?,
        // Repeatable, not a comma list: workload labels contain commas.
        workloads: Some(args.take_all("workload")?).filter(|w| !w.is_empty()),
        count_syscalls: args.switch("syscalls"),
    };
    let d = RunConfig::default();
    let cfg = RunConfig {
        rounds: args.get("rounds", d.rounds)?.max(1),
        port_base: args.get("port-base", d.port_base)?,
        server_cpus: args.opt("server-cpus")?,
        client_cpus: args.opt("client-cpus")?,
        duration_ms: args.get("duration-ms", d.duration_ms)?,
        warmup_ms: args.get("warmup-ms", d.warmup_ms)?,
        threads: args.get("threads", d.threads)?.max(1),
        settle: Duration::from_millis(args.get("settle-ms", d.settle.as_millis() as u64)?),
        ..d
    };
    let json_out = args.opt::<String>("json-out")?.map(PathBuf::from);
    let dry_run = args.switch("dry-run");
    args.finish()?;
    let suite = suite::build(&what, &opts).map_err(CliError::Suite)?;
    Ok(Command::Run {
        plan: Box::new(Plan {
            suite,
            catalog,
            vars,
            cfg,
        }),
        json_out,
        dry_run,
    })
}

/// Switches (flags without a value).
pub const SWITCHES: &[&str] = &["dry-run", "syscalls"];

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(words: &[&str]) -> Result<Command, CliError> {
        parse(
            Args::parse(words.iter().copied(), SWITCHES).unwrap(),
            "/exe",
        )
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
        assert!(matches!(
            parse_words(&["echo", "--roundz", "1"]),
            Err(CliError::Args(_))
        ));
        assert!(matches!(parse_words(&["list"]), Ok(Command::List { .. })));
    }
}
