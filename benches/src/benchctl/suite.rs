//! The named suites: which workloads run against which server variants, what the baseline is,
//! and which columns the summary table shows.

use std::fmt;

use super::template::Vars;

/// One load shape, run by one client process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    ClosedLoop {
        conns: usize,
        depth: usize,
        size: usize,
    },
    Probe {
        hot_conns: usize,
        hot_depth: usize,
        size: usize,
        probe_size: usize,
    },
    AcceptStorm {
        cycles: u64,
        size: usize,
    },
}

fn bytes_label(size: usize) -> String {
    if size >= 1024 && size.is_multiple_of(1024) {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}

impl Suite {
    /// The baseline and the further variants ratios are shown against.
    pub fn baselines(&self) -> Vec<String> {
        let mut all = vec![self.baseline.clone()];
        for label in &self.also_vs {
            if !all.contains(label) && self.variants.iter().any(|v| &v.label == label) {
                all.push(label.clone());
            }
        }
        all
    }
}

impl Workload {
    /// Short human label for tables.
    pub fn label(&self) -> String {
        match *self {
            Workload::ClosedLoop { conns, depth, size } => {
                format!("{conns} conn × depth {depth}, {}", bytes_label(size))
            }
            Workload::Probe {
                hot_conns,
                hot_depth,
                size,
                probe_size,
            } => format!(
                "{hot_conns} hot × depth {hot_depth} ({}) + probe ({})",
                bytes_label(size),
                bytes_label(probe_size)
            ),
            Workload::AcceptStorm { cycles, size } => {
                format!("{cycles} cycles, {}", bytes_label(size))
            }
        }
    }

    /// Template variables describing the workload.
    pub fn vars(&self) -> Vec<(&'static str, String)> {
        match *self {
            Workload::ClosedLoop { conns, depth, size } => vec![
                ("conns", conns.to_string()),
                ("depth", depth.to_string()),
                ("size", size.to_string()),
            ],
            Workload::Probe {
                hot_conns,
                hot_depth,
                size,
                probe_size,
            } => vec![
                ("hot_conns", hot_conns.to_string()),
                ("hot_depth", hot_depth.to_string()),
                ("size", size.to_string()),
                ("probe_size", probe_size.to_string()),
            ],
            Workload::AcceptStorm { cycles, size } => {
                vec![("cycles", cycles.to_string()), ("size", size.to_string())]
            }
        }
    }

    /// The raw-echo loadgen command for this workload.
    pub fn loadgen_template(&self) -> &'static str {
        match self {
            Workload::ClosedLoop { .. } => {
                "{bin}/loadgen --addr {addr} --conns {conns} --depth {depth} --size {size} \
                 --duration-ms {duration_ms} --warmup-ms {warmup_ms} --threads {threads} \
                 --server-pid {server_pid}{loadgen_flags}"
            }
            Workload::Probe { .. } => {
                "{bin}/loadgen --probe --addr {addr} --hot-conns {hot_conns} \
                 --hot-depth {hot_depth} --size {size} --probe-size {probe_size} \
                 --duration-ms {duration_ms} --warmup-ms {warmup_ms} --threads {threads} \
                 --server-pid {server_pid}"
            }
            Workload::AcceptStorm { .. } => {
                "{bin}/loadgen --accept-storm {cycles} --addr {addr} --size {size} \
                 --threads {threads} --server-pid {server_pid}"
            }
        }
    }

    /// True when a server's own client (e.g. gRPC) may replace loadgen.
    pub fn is_closed_loop(&self) -> bool {
        matches!(self, Workload::ClosedLoop { .. })
    }

    /// True for the fairness probe (whose probe may have its own listener).
    pub fn is_probe(&self) -> bool {
        matches!(self, Workload::Probe { .. })
    }
}

/// One server configuration compared in a suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// Row label, also what `--baseline` names.
    pub label: String,
    /// Catalog name of the server.
    pub server: String,
    /// Variables for the server template (shards, workers, accept, budgets …).
    pub vars: Vars,
}

/// A table column: a report key and how to print it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub key: &'static str,
    pub header: &'static str,
    pub decimals: usize,
}

const fn col(key: &'static str, header: &'static str, decimals: usize) -> Column {
    Column {
        key,
        header,
        decimals,
    }
}

/// A fully specified suite.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    pub workloads: Vec<Workload>,
    pub variants: Vec<Variant>,
    /// Label of the variant the ratios are relative to.
    pub baseline: String,
    /// Further variants to show the same ratios against (the per-core suite compares with
    /// tokio, monoio and the kernel floor at once); labels not among the variants are skipped.
    pub also_vs: Vec<String>,
    /// Medians shown per row.
    pub columns: Vec<Column>,
    /// Keys shown as "row median / baseline median".
    pub ratios: Vec<Column>,
    /// Server-template variables the variants differ in; a template that uses none of them
    /// runs every variant identically, which the report flags.
    pub varied: Vec<&'static str>,
}

/// Knobs of the suites (command-line overridable).
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    pub servers: Option<Vec<String>>,
    pub baseline: Option<String>,
    pub shards: usize,
    pub workers: usize,
    pub size: Option<usize>,
    pub budgets: Vec<String>,
    pub budget_bytes: Option<u64>,
    pub accept_modes: Vec<String>,
    pub cycles: u64,
    pub hot_conns: usize,
    pub hot_depth: usize,
    pub probe_size: usize,
    /// Fairness: FNV-1a passes the corewire RPC server's handler makes over each payload
    /// (`--hash-rounds`, its CPU cost per message; 0 = a plain echo).
    pub hash_rounds: u32,
    /// Keep only workloads whose label contains one of these (e.g. "1 conn").
    pub workloads: Option<Vec<String>>,
    /// Per-core suite: loadgen counts the server's io_uring enters and syscalls with perf
    /// (a tracepoint per syscall perturbs timing, so this is a separate pass).
    pub count_syscalls: bool,
}

impl Default for SuiteOptions {
    fn default() -> Self {
        SuiteOptions {
            servers: None,
            baseline: None,
            shards: 2,
            workers: 2,
            size: None,
            budgets: ["unlimited", "64", "32", "16", "4"]
                .map(String::from)
                .to_vec(),
            budget_bytes: None,
            accept_modes: vec!["reuseport".into(), "handoff".into()],
            cycles: 20_000,
            hot_conns: 8,
            hot_depth: 32,
            probe_size: 64,
            hash_rounds: DEFAULT_HASH_ROUNDS,
            workloads: None,
            count_syscalls: false,
        }
    }
}

/// Why a suite could not be assembled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuiteError {
    UnknownSuite(String),
    NoServers,
    /// `--workload` matched none of the suite's workloads.
    NoWorkloads(Vec<String>),
    BaselineMissing {
        baseline: String,
        labels: Vec<String>,
    },
}

impl fmt::Display for SuiteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SuiteError::UnknownSuite(s) => {
                write!(
                    f,
                    "unknown suite {s:?} (echo, percore, scaling, fairness, accept, rpc)"
                )
            }
            SuiteError::NoServers => write!(f, "no servers selected"),
            SuiteError::NoWorkloads(filters) => {
                write!(f, "--workload {:?} matched no workload", filters)
            }
            SuiteError::BaselineMissing { baseline, labels } => write!(
                f,
                "baseline {baseline:?} is not one of the variants: {}",
                labels.join(", ")
            ),
        }
    }
}

impl std::error::Error for SuiteError {}

/// The fairness suite's handler cost: FNV-1a passes over each 64 B payload, a few µs of real
/// work per message (the server's CPU per request shows what it costs on the machine at hand).
pub const DEFAULT_HASH_ROUNDS: u32 = 32;

/// Names of the suites.
pub const SUITES: [&str; 6] = ["echo", "percore", "scaling", "fairness", "accept", "rpc"];

/// The per-core suite's peers, in table order: corewire with one shard (on io_uring, then on
/// its epoll backend), tokio's current-thread runtime (epoll), monoio (io_uring, one thread),
/// glommio (one executor) and the raw-ring kernel floor.
pub const PERCORE_SERVERS: [&str; 6] = [
    "corewire",
    "corewire-epoll",
    "tokio-ct",
    "monoio",
    "glommio-1",
    "floor",
];

/// Columns of the per-core table: the latency columns plus the server's CPU split and syscalls.
const PERCORE_COLUMNS: [Column; 9] = [
    col("qps", "QPS", 0),
    col("p50_us", "p50 µs", 1),
    col("p99_us", "p99 µs", 1),
    col("server_user_us_per_req", "srv user µs/req", 3),
    col("server_sys_us_per_req", "srv sys µs/req", 3),
    col("server_cpu_us_per_req", "srv CPU µs/req", 2),
    col("server_enters_per_req", "enters/req", 3),
    col("server_syscalls_per_req", "syscalls/req", 3),
    col("client_cpu_us_per_req", "cli CPU µs/req", 2),
];

/// Ratios of the per-core table: the latency ratios plus p50, for 1-connection
/// target (p50 at 1 conn × depth 1 no worse than tokio's).
const PERCORE_RATIOS: [Column; 4] = [
    col("qps", "QPS", 2),
    col("p50_us", "p50", 2),
    col("p99_us", "p99", 2),
    col("server_cpu_us_per_req", "srv CPU/req", 2),
];

fn base_vars(opts: &SuiteOptions) -> Vars {
    [
        ("shards", opts.shards.to_string()),
        ("workers", opts.workers.to_string()),
        ("accept", "reuseport".to_string()),
        ("accept_flag", String::new()),
        ("budget_msgs", "unlimited".to_string()),
        ("budget_flag", String::new()),
        ("handler_flags", String::new()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn servers_or(opts: &SuiteOptions, default: &[&str]) -> Result<Vec<String>, SuiteError> {
    let servers = opts
        .servers
        .clone()
        .unwrap_or_else(|| default.iter().map(|s| s.to_string()).collect());
    if servers.is_empty() {
        Err(SuiteError::NoServers)
    } else {
        Ok(servers)
    }
}

fn per_server(opts: &SuiteOptions, servers: Vec<String>) -> Vec<Variant> {
    servers
        .into_iter()
        .map(|server| Variant {
            label: server.clone(),
            server,
            vars: base_vars(opts),
        })
        .collect()
}

const LATENCY_COLUMNS: [Column; 6] = [
    col("qps", "QPS", 0),
    col("p50_us", "p50 µs", 1),
    col("p99_us", "p99 µs", 1),
    col("p999_us", "p99.9 µs", 1),
    col("server_cpu_us_per_req", "srv CPU µs/req", 2),
    col("client_cpu_us_per_req", "cli CPU µs/req", 2),
];

const LATENCY_RATIOS: [Column; 3] = [
    col("qps", "QPS", 2),
    col("p99_us", "p99", 2),
    col("server_cpu_us_per_req", "srv CPU/req", 2),
];

fn closed(conns: usize, depth: usize, size: usize) -> Workload {
    Workload::ClosedLoop { conns, depth, size }
}

/// Assembles suite `name`.
pub fn build(name: &str, opts: &SuiteOptions) -> Result<Suite, SuiteError> {
    let suite = match name {
        "echo" => {
            let small = opts.size.unwrap_or(64);
            Suite {
                name: name.to_string(),
                workloads: vec![
                    closed(1, 1, small),
                    closed(1, 1, 4096),
                    closed(64, 4, small),
                ],
                variants: per_server(opts, servers_or(opts, &["corewire", "tokio", "glommio"])?),
                baseline: opts.baseline.clone().unwrap_or_else(|| "tokio".into()),
                columns: LATENCY_COLUMNS.to_vec(),
                ratios: LATENCY_RATIOS.to_vec(),
                varied: vec![],
                also_vs: vec![],
            }
        }
        "percore" => {
            let small = opts.size.unwrap_or(64);
            let mut variants = per_server(opts, servers_or(opts, &PERCORE_SERVERS)?);
            for v in &mut variants {
                v.vars.insert("shards".into(), "1".into());
                v.vars.insert("workers".into(), "1".into());
                if opts.count_syscalls {
                    v.vars
                        .insert("loadgen_flags".into(), " --server-syscalls".into());
                }
            }
            Suite {
                name: name.to_string(),
                workloads: vec![
                    closed(64, 4, small),
                    closed(64, 4, 4096),
                    closed(256, 4, small),
                    closed(256, 4, 4096),
                    // Latency alone: one request in flight (p50 <= tokio's).
                    closed(1, 1, small),
                ],
                variants,
                baseline: opts.baseline.clone().unwrap_or_else(|| "tokio-ct".into()),
                columns: PERCORE_COLUMNS.to_vec(),
                ratios: PERCORE_RATIOS.to_vec(),
                varied: vec![],
                also_vs: vec!["monoio".into(), "floor".into()],
            }
        }
        "scaling" => {
            // 64 connections per shard (and per client thread), so each shard sees the same
            // load at every count and the per-shard efficiency compares like with like.
            let conns = 64 * opts.shards.max(1);
            let small = opts.size.unwrap_or(64);
            Suite {
                name: name.to_string(),
                workloads: vec![closed(conns, 4, small), closed(conns, 4, 4096)],
                variants: per_server(
                    opts,
                    servers_or(opts, &["corewire", "tokio-mt", "monoio-mt"])?,
                ),
                baseline: opts.baseline.clone().unwrap_or_else(|| "tokio-mt".into()),
                columns: LATENCY_COLUMNS.to_vec(),
                ratios: LATENCY_RATIOS.to_vec(),
                varied: vec![],
                also_vs: vec!["monoio-mt".into()],
            }
        }
        "rpc" => {
            let small = opts.size.unwrap_or(64);
            Suite {
                name: name.to_string(),
                workloads: vec![
                    closed(64, 4, small),
                    closed(64, 4, 4096),
                    closed(1, 1, small),
                    closed(1, 1, 4096),
                ],
                variants: per_server(
                    opts,
                    servers_or(opts, &["corewire-rpc", "tonic", "corewire-raw"])?,
                ),
                baseline: opts.baseline.clone().unwrap_or_else(|| "tonic".into()),
                // Allocations and task polls per request: printed by the corewire RPC
                // server (counting allocator, runtime counters), and the corewire RPC
                // client's allocations per call; empty for the other peers.
                columns: [
                    &LATENCY_COLUMNS[..],
                    &[
                        col("server_allocs_per_req", "srv allocs/req", 2),
                        col("server_polls_per_req", "srv polls/req", 2),
                        col("client_allocs_per_req", "cli allocs/req", 2),
                    ],
                ]
                .concat(),
                ratios: LATENCY_RATIOS.to_vec(),
                varied: vec![],
                also_vs: vec![],
            }
        }
        "fairness" => {
            let server = servers_or(opts, &["corewire-rpc"])?.remove(0);
            let handler_flags = match opts.hash_rounds {
                0 => String::new(),
                n => format!(" --hash-rounds {n}"),
            };
            let variants = opts
                .budgets
                .iter()
                .map(|budget| {
                    let mut vars = base_vars(opts);
                    vars.insert("shards".into(), "1".into());
                    vars.insert("workers".into(), "1".into());
                    vars.insert("budget_msgs".into(), budget.clone());
                    let mut flag = format!(" --budget-msgs {budget}");
                    if let Some(bytes) = opts.budget_bytes {
                        flag.push_str(&format!(" --budget-bytes {bytes}"));
                    }
                    vars.insert("budget_flag".into(), flag);
                    vars.insert("handler_flags".into(), handler_flags.clone());
                    Variant {
                        label: format!("budget={budget}"),
                        server: server.clone(),
                        vars,
                    }
                })
                .collect();
            Suite {
                name: name.to_string(),
                workloads: vec![Workload::Probe {
                    hot_conns: opts.hot_conns,
                    hot_depth: opts.hot_depth,
                    size: opts.size.unwrap_or(64),
                    probe_size: opts.probe_size,
                }],
                variants,
                baseline: opts
                    .baseline
                    .clone()
                    .unwrap_or_else(|| "budget=unlimited".into()),
                columns: vec![
                    col("probe_p50_us", "probe p50 µs", 1),
                    col("probe_p99_us", "probe p99 µs", 1),
                    col("probe_p999_us", "probe p99.9 µs", 1),
                    // Head-of-line counts (messages the shard handled while a probe request
                    // waited), from servers that give the probe its own listener and print
                    // them (the corewire RPC server's probe_hol_*).
                    col("probe_hol_p50", "probe HOL p50", 0),
                    col("probe_hol_p99", "probe HOL p99", 0),
                    col("probe_hol_max", "probe HOL max", 0),
                    col("hot_msgs_per_s", "hot msgs/s", 0),
                    col("server_cpu_us_per_req", "srv CPU µs/req", 2),
                    // % of one CPU over the window: the server should be near 100 (it is the
                    // bottleneck), the client well below 100 × its threads.
                    col("server_cpu_pct", "srv CPU %", 0),
                    col("client_cpu_pct", "cli CPU %", 0),
                ],
                ratios: vec![
                    col("hot_msgs_per_s", "hot tput", 2),
                    col("probe_p99_us", "probe p99", 2),
                    col("probe_hol_p99", "probe HOL p99", 2),
                ],
                varied: vec!["budget_flag", "budget_msgs"],
                also_vs: vec![],
            }
        }
        "accept" => {
            let server = servers_or(opts, &["corewire"])?.remove(0);
            let variants = opts
                .accept_modes
                .iter()
                .map(|mode| {
                    let mut vars = base_vars(opts);
                    vars.insert("accept".into(), mode.clone());
                    vars.insert("accept_flag".into(), format!(" --accept {mode}"));
                    Variant {
                        label: format!("accept={mode}"),
                        server: server.clone(),
                        vars,
                    }
                })
                .collect();
            Suite {
                name: name.to_string(),
                workloads: vec![Workload::AcceptStorm {
                    cycles: opts.cycles,
                    size: opts.size.unwrap_or(64),
                }],
                variants,
                baseline: opts
                    .baseline
                    .clone()
                    .unwrap_or_else(|| "accept=reuseport".into()),
                columns: vec![
                    col("cycles_per_s", "cycles/s", 0),
                    col("p50_us", "cycle p50 µs", 1),
                    col("p99_us", "cycle p99 µs", 1),
                    col("balance_max_dev_pct", "balance max dev %", 1),
                    col("server_cpu_us_per_req", "srv CPU µs/cycle", 2),
                ],
                ratios: vec![col("cycles_per_s", "cycles/s", 2)],
                varied: vec!["accept", "accept_flag"],
                also_vs: vec![],
            }
        }
        other => return Err(SuiteError::UnknownSuite(other.to_string())),
    };
    let mut suite = suite;
    if let Some(filters) = &opts.workloads {
        suite
            .workloads
            .retain(|w| filters.iter().any(|f| w.label().contains(f.as_str())));
        if suite.workloads.is_empty() {
            return Err(SuiteError::NoWorkloads(filters.clone()));
        }
    }
    if !suite.variants.iter().any(|v| v.label == suite.baseline) {
        return Err(SuiteError::BaselineMissing {
            baseline: suite.baseline,
            labels: suite.variants.iter().map(|v| v.label.clone()).collect(),
        });
    }
    Ok(suite)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_suite_compares_servers_on_three_workloads() {
        let s = build("echo", &SuiteOptions::default()).unwrap();
        assert_eq!(s.workloads.len(), 3);
        let labels: Vec<_> = s.variants.iter().map(|v| v.label.as_str()).collect();
        assert_eq!(labels, ["corewire", "tokio", "glommio"]);
        assert_eq!(s.baseline, "tokio");
        assert_eq!(s.workloads[2].label(), "64 conn × depth 4, 64 B");
        assert_eq!(s.workloads[1].label(), "1 conn × depth 1, 4 KiB");
    }

    #[test]
    fn percore_suite_runs_one_thread_peers_against_three_baselines() {
        let s = build("percore", &SuiteOptions::default()).unwrap();
        let labels: Vec<_> = s.variants.iter().map(|v| v.label.as_str()).collect();
        assert_eq!(labels, PERCORE_SERVERS);
        assert!(s.variants.iter().all(|v| v.vars["shards"] == "1"));
        assert!(s
            .variants
            .iter()
            .all(|v| !v.vars.contains_key("loadgen_flags")));
        assert_eq!(s.baselines(), ["tokio-ct", "monoio", "floor"]);
        let w: Vec<_> = s.workloads.iter().map(Workload::label).collect();
        assert_eq!(
            w,
            [
                "64 conn × depth 4, 64 B",
                "64 conn × depth 4, 4 KiB",
                "256 conn × depth 4, 64 B",
                "256 conn × depth 4, 4 KiB",
                "1 conn × depth 1, 64 B"
            ]
        );
        let ratios: Vec<_> = s.ratios.iter().map(|c| c.key).collect();
        assert_eq!(
            ratios,
            ["qps", "p50_us", "p99_us", "server_cpu_us_per_req"],
            "the 1-connection target is a p50 ratio"
        );
        let opts = SuiteOptions {
            count_syscalls: true,
            servers: Some(vec!["corewire".into(), "tokio-ct".into()]),
            ..SuiteOptions::default()
        };
        let s = build("percore", &opts).unwrap();
        assert_eq!(s.variants[0].vars["loadgen_flags"], " --server-syscalls");
        assert_eq!(
            s.baselines(),
            ["tokio-ct"],
            "absent peers are not baselines"
        );
    }

    #[test]
    fn scaling_suite_gives_each_shard_the_same_load_against_multi_thread_peers() {
        let opts = SuiteOptions {
            shards: 4,
            workers: 4,
            ..SuiteOptions::default()
        };
        let s = build("scaling", &opts).unwrap();
        let labels: Vec<_> = s.variants.iter().map(|v| v.label.as_str()).collect();
        assert_eq!(labels, ["corewire", "tokio-mt", "monoio-mt"]);
        assert_eq!(s.baselines(), ["tokio-mt", "monoio-mt"]);
        assert!(s.variants.iter().all(|v| v.vars["workers"] == "4"));
        let w: Vec<_> = s.workloads.iter().map(Workload::label).collect();
        assert_eq!(w, ["256 conn × depth 4, 64 B", "256 conn × depth 4, 4 KiB"]);
    }

    #[test]
    fn rpc_suite_includes_the_raw_echo_floor() {
        let s = build("rpc", &SuiteOptions::default()).unwrap();
        let labels: Vec<_> = s.variants.iter().map(|v| v.label.as_str()).collect();
        assert_eq!(labels, ["corewire-rpc", "tonic", "corewire-raw"]);
        assert_eq!(s.baseline, "tonic");
        assert_eq!(s.workloads.len(), 4);
    }

    #[test]
    fn workload_filter_keeps_matching_labels() {
        let opts = SuiteOptions {
            workloads: Some(vec!["1 conn".into()]),
            ..SuiteOptions::default()
        };
        let s = build("echo", &opts).unwrap();
        let labels: Vec<_> = s.workloads.iter().map(Workload::label).collect();
        assert_eq!(
            labels,
            ["1 conn × depth 1, 64 B", "1 conn × depth 1, 4 KiB"]
        );
        let opts = SuiteOptions {
            workloads: Some(vec!["7 conn".into()]),
            ..SuiteOptions::default()
        };
        assert!(matches!(
            build("echo", &opts),
            Err(SuiteError::NoWorkloads(_))
        ));
    }

    #[test]
    fn fairness_defaults_to_the_rpc_service_with_a_handler_cost() {
        let s = build("fairness", &SuiteOptions::default()).unwrap();
        assert!(s.variants.iter().all(|v| v.server == "corewire-rpc"));
        assert_eq!(
            s.variants[0].vars["handler_flags"],
            format!(" --hash-rounds {DEFAULT_HASH_ROUNDS}")
        );
        let opts = SuiteOptions {
            hash_rounds: 0,
            ..SuiteOptions::default()
        };
        let s = build("fairness", &opts).unwrap();
        assert_eq!(s.variants[0].vars["handler_flags"], "");
    }

    #[test]
    fn fairness_varies_budget_on_one_single_shard_server() {
        let opts = SuiteOptions {
            servers: Some(vec!["tokio".into()]),
            budget_bytes: Some(65536),
            ..SuiteOptions::default()
        };
        let s = build("fairness", &opts).unwrap();
        assert_eq!(s.variants.len(), 5);
        let v = &s.variants[1];
        assert_eq!(v.label, "budget=64");
        assert_eq!(v.server, "tokio");
        assert_eq!(v.vars["shards"], "1");
        assert_eq!(
            v.vars["budget_flag"],
            " --budget-msgs 64 --budget-bytes 65536"
        );
        assert_eq!(s.baseline, "budget=unlimited");
    }

    #[test]
    fn accept_suite_and_errors() {
        let s = build("accept", &SuiteOptions::default()).unwrap();
        assert_eq!(s.variants[1].vars["accept_flag"], " --accept handoff");
        assert_eq!(
            build("nope", &SuiteOptions::default()).unwrap_err(),
            SuiteError::UnknownSuite("nope".into())
        );
        let opts = SuiteOptions {
            baseline: Some("x".into()),
            ..SuiteOptions::default()
        };
        assert!(matches!(
            build("rpc", &opts),
            Err(SuiteError::BaselineMissing { .. })
        ));
        let opts = SuiteOptions {
            servers: Some(vec![]),
            ..SuiteOptions::default()
        };
        assert_eq!(build("echo", &opts).unwrap_err(), SuiteError::NoServers);
    }
}
