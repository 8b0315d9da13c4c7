//! A suite bound to server templates and run settings: renders every command, checks them
//! before anything starts, and executes the rounds.

use std::fmt;
use std::time::Duration;

use super::catalog::Catalog;
use super::listen;
use super::process::{self, ServerProcess};
use super::record::{RunRecord, RunResult};
use super::suite::Suite;
use super::template::{self, TemplateError, Vars};
use crate::server_metrics::parse_metric_line;
use crate::stats_line::ShardLine;

/// Settings shared by every measurement of a run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub rounds: usize,
    pub port_base: u16,
    /// `taskset -c` list for servers; `None` leaves them unpinned.
    pub server_cpus: Option<String>,
    /// `taskset -c` list for clients; `None` leaves them unpinned.
    pub client_cpus: Option<String>,
    pub duration_ms: u64,
    pub warmup_ms: u64,
    pub threads: usize,
    /// How long the listener count must stay unchanged before the server counts as up.
    pub settle: Duration,
    pub start_timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            rounds: 5,
            port_base: 20_000,
            server_cpus: None,
            client_cpus: None,
            duration_ms: 3000,
            warmup_ms: 1000,
            threads: 1,
            settle: Duration::from_millis(150),
            start_timeout: Duration::from_secs(15),
            grace: Duration::from_secs(10),
        }
    }
}

/// Why a plan cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    UnknownServer(String),
    Template(TemplateError),
    NoFreePort(u16),
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::UnknownServer(s) => write!(
                f,
                "server {s:?} is not defined (built in: tokio, tokio-ct, glommio, glommio-1, monoio, floor, tonic, corewire, corewire-epoll, corewire-raw, corewire-rpc; add with --server {s}=TEMPLATE)"
            ),
            PlanError::Template(e) => write!(f, "{e}"),
            PlanError::NoFreePort(base) => write!(f, "no free port at or above {base}"),
        }
    }
}

impl std::error::Error for PlanError {}

impl From<TemplateError> for PlanError {
    fn from(e: TemplateError) -> Self {
        PlanError::Template(e)
    }
}

/// A runnable suite.
#[derive(Debug, Clone)]
pub struct Plan {
    pub suite: Suite,
    pub catalog: Catalog,
    /// Global template variables (`bin`, corewire paths, `--var`s).
    pub vars: Vars,
    pub cfg: RunConfig,
}

fn pinned(cpus: &Option<String>, command: String) -> String {
    match cpus {
        Some(list) => format!("taskset -c {list} {command}"),
        None => command,
    }
}

impl Plan {
    fn run_vars(&self, workload: usize, variant: usize, port: u16, server_pid: &str) -> Vars {
        let mut vars = self.vars.clone();
        vars.extend(self.suite.variants[variant].vars.clone());
        for (k, v) in self.suite.workloads[workload].vars() {
            vars.insert(k.to_string(), v);
        }
        let c = &self.cfg;
        // The port after `port` is kept free too (see `free_port`): the probe's own listener.
        let probe_addr = format!("127.0.0.1:{}", port.wrapping_add(1));
        let probe_listener_flag = if self.suite.workloads[workload].is_probe() {
            format!(" --probe-addr {probe_addr}")
        } else {
            String::new()
        };
        for (k, v) in [
            ("port", port.to_string()),
            ("addr", format!("127.0.0.1:{port}")),
            ("probe_addr", probe_addr),
            ("probe_listener_flag", probe_listener_flag),
            ("server_pid", server_pid.to_string()),
            ("duration_ms", c.duration_ms.to_string()),
            ("warmup_ms", c.warmup_ms.to_string()),
            ("threads", c.threads.to_string()),
        ] {
            vars.insert(k.to_string(), v);
        }
        vars
    }

    /// The server command of one measurement.
    pub fn server_command(
        &self,
        workload: usize,
        variant: usize,
        port: u16,
    ) -> Result<String, PlanError> {
        let name = &self.suite.variants[variant].server;
        let def = self
            .catalog
            .get(name)
            .ok_or_else(|| PlanError::UnknownServer(name.clone()))?;
        let vars = self.run_vars(workload, variant, port, "");
        Ok(pinned(
            &self.cfg.server_cpus,
            template::render(&def.server, &vars)?,
        ))
    }

    /// The client command of one measurement, once the server's pid is known.
    pub fn client_command(
        &self,
        workload: usize,
        variant: usize,
        port: u16,
        server_pid: &str,
    ) -> Result<String, PlanError> {
        let name = &self.suite.variants[variant].server;
        let def = self
            .catalog
            .get(name)
            .ok_or_else(|| PlanError::UnknownServer(name.clone()))?;
        let w = &self.suite.workloads[workload];
        let own = if w.is_closed_loop() {
            &def.client
        } else if w.is_probe() {
            &def.probe_client
        } else {
            &None
        };
        let tpl = own.as_deref().unwrap_or_else(|| w.loadgen_template());
        let vars = self.run_vars(workload, variant, port, server_pid);
        Ok(pinned(&self.cfg.client_cpus, template::render(tpl, &vars)?))
    }

    /// Renders every command once (so a bad template fails before any server starts) and
    /// returns warnings about variants that cannot differ.
    pub fn validate(&self) -> Result<Vec<String>, PlanError> {
        for w in 0..self.suite.workloads.len() {
            for v in 0..self.suite.variants.len() {
                self.server_command(w, v, self.cfg.port_base)?;
                self.client_command(w, v, self.cfg.port_base, "1")?;
            }
        }
        let mut warnings = Vec::new();
        if !self.suite.varied.is_empty() && self.suite.variants.len() > 1 {
            let mut servers: Vec<&String> = self.suite.variants.iter().map(|v| &v.server).collect();
            servers.dedup();
            for name in servers {
                if let Some(def) = self.catalog.get(name) {
                    let used = template::placeholders(&def.server);
                    if !self.suite.varied.iter().any(|k| used.contains(k)) {
                        warnings.push(format!(
                            "server `{name}`'s template uses none of {{{}}}: every variant runs the same server command, so differences between rows are noise (exercise run only)",
                            self.suite.varied.join("}, {")
                        ));
                    }
                }
            }
        }
        Ok(warnings)
    }

    fn client_timeout(&self) -> Duration {
        Duration::from_millis(self.cfg.warmup_ms + self.cfg.duration_ms) + Duration::from_secs(120)
    }

    /// Runs every round (variants interleaved within a round so drift hits all alike), calling
    /// `progress` after each measurement.
    pub fn execute(
        &self,
        mut progress: impl FnMut(&RunRecord),
    ) -> Result<Vec<RunRecord>, PlanError> {
        let mut records = Vec::new();
        let mut port = self.cfg.port_base;
        for round in 1..=self.cfg.rounds {
            for w in 0..self.suite.workloads.len() {
                for v in 0..self.suite.variants.len() {
                    port = free_port(port)?;
                    let record = self.measure(round, w, v, port)?;
                    port = port.wrapping_add(2).max(self.cfg.port_base);
                    progress(&record);
                    records.push(record);
                }
            }
        }
        Ok(records)
    }

    fn measure(&self, round: usize, w: usize, v: usize, port: u16) -> Result<RunRecord, PlanError> {
        let server_cmd = self.server_command(w, v, port)?;
        let mut record = RunRecord {
            round,
            workload: w,
            variant: v,
            server_cmd: server_cmd.clone(),
            client_cmd: self.client_command(w, v, port, "$SERVER_PID")?,
            result: Err(String::new()),
        };
        let server = match ServerProcess::start(
            &server_cmd,
            port,
            self.cfg.start_timeout,
            self.cfg.settle,
        ) {
            Ok(s) => s,
            Err(e) => {
                record.result = Err(e.to_string());
                return Ok(record);
            }
        };
        record.client_cmd = self.client_command(w, v, port, &server.pid().to_string())?;
        let client = process::run_client(&record.client_cmd, self.client_timeout());
        let exit = server.stop(self.cfg.grace);
        let shards: Vec<ShardLine> = exit
            .stdout
            .iter()
            .filter_map(|l| ShardLine::parse(l))
            .collect();
        let server_metrics: Vec<(String, f64)> = exit
            .stdout
            .iter()
            .filter_map(|l| parse_metric_line(l))
            .flatten()
            .collect();
        record.result = client.map_err(|e| e.to_string()).map(|run| {
            let mut notes = Vec::new();
            if !run.status.success() {
                notes.push(format!("client {}", run.status));
            }
            if exit.killed {
                notes.push("server ignored SIGTERM and was killed".to_string());
            } else if let Some(status) = exit.status.filter(|s| !s.success()) {
                notes.push(format!("server {status}"));
            }
            RunResult {
                report: run.report,
                shards,
                notes,
                server_metrics,
            }
        });
        Ok(record)
    }
}

/// The first port at or after `from` that is free, with the next one free as well (for a
/// probe's own listener). Free: nothing listening (a leftover SO_REUSEPORT listener would
/// silently share a port with the next server) and nothing else bound (a client's ephemeral
/// port, if the range overlaps).
fn free_port(from: u16) -> Result<u16, PlanError> {
    let free = |p: u16| {
        listen::listeners_on(p) == 0 && std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()
    };
    (from..u16::MAX)
        .find(|&p| free(p) && free(p + 1))
        .ok_or(PlanError::NoFreePort(from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchctl::catalog::default_vars;
    use crate::benchctl::suite::{build, SuiteOptions};

    fn plan(suite: &str, servers: &[&str]) -> Plan {
        let opts = SuiteOptions {
            servers: Some(servers.iter().map(|s| s.to_string()).collect()),
            baseline: Some(match suite {
                "fairness" => "budget=unlimited".into(),
                "accept" => "accept=reuseport".into(),
                _ => servers[0].to_string(),
            }),
            ..SuiteOptions::default()
        };
        Plan {
            suite: build(suite, &opts).unwrap(),
            catalog: Catalog::builtin(),
            vars: default_vars("/b"),
            cfg: RunConfig {
                server_cpus: Some("1".into()),
                ..RunConfig::default()
            },
        }
    }

    #[test]
    fn renders_exact_commands() {
        let p = plan("echo", &["tokio", "corewire"]);
        assert_eq!(
            p.server_command(0, 0, 20001).unwrap(),
            "taskset -c 1 /b/echo_tokio --addr 127.0.0.1:20001 --workers 2 --accept reuseport"
        );
        assert_eq!(
            p.server_command(0, 1, 20001).unwrap(),
            "taskset -c 1 target/release/examples/echo_server --addr 127.0.0.1:20001 --shards 2"
        );
        assert_eq!(
            p.client_command(2, 0, 20001, "42").unwrap(),
            "/b/loadgen --addr 127.0.0.1:20001 --conns 64 --depth 4 --size 64 --duration-ms 3000 \
             --warmup-ms 1000 --threads 1 --server-pid 42"
        );
        let fair = plan("fairness", &["corewire"]);
        assert!(fair
            .server_command(0, 2, 1)
            .unwrap()
            .ends_with("--shards 1 --budget-msgs 32"));
        let fair_rpc = plan("fairness", &["corewire-rpc"]);
        assert_eq!(
            fair_rpc.server_command(0, 0, 20001).unwrap(),
            "taskset -c 1 /b/rpc_corewire server --addr 127.0.0.1:20001 --shards 1 \
             --budget-msgs unlimited --hash-rounds 32 --probe-addr 127.0.0.1:20002"
        );
        assert!(fair_rpc
            .client_command(0, 0, 20001, "42")
            .unwrap()
            .starts_with(
                "/b/rpc_corewire client --probe --probe-addr 127.0.0.1:20002 \
                 --addr 127.0.0.1:20001 --hot-conns 8"
            ));
        let rpc = plan("rpc", &["tonic"]);
        assert!(rpc
            .client_command(0, 0, 1, "7")
            .unwrap()
            .starts_with("/b/rpc_tonic client --addr 127.0.0.1:1 --conns 64"));
    }

    #[test]
    fn validation_catches_unknown_servers_and_flags_identical_variants() {
        assert_eq!(
            plan("echo", &["nginx"]).validate(),
            Err(PlanError::UnknownServer("nginx".into()))
        );
        let warnings = plan("fairness", &["tokio"]).validate().unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(plan("fairness", &["corewire"])
            .validate()
            .unwrap()
            .is_empty());
        assert!(plan("accept", &["tokio"]).validate().unwrap().is_empty());
        let mut bad = plan("echo", &["tokio"]);
        bad.catalog.set_server("tokio", "x {nope}");
        assert!(matches!(bad.validate(), Err(PlanError::Template(_))));
    }
}
