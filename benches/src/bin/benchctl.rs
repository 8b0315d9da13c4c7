//! Benchmark orchestrator; see `benchctl --help`.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use corewire_bench::benchctl::cli::{self, Cli, Command};
use corewire_bench::benchctl::plan::Plan;
use corewire_bench::benchctl::record::RunRecord;
use corewire_bench::benchctl::summary::{self, ReportContext};

fn exe_dir() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.display().to_string()))
        .unwrap_or_else(|| ".".to_string())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

fn online_cpus() -> usize {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN) {
        Ok(Some(n)) if n > 0 => n as usize,
        _ => 1,
    }
}

fn progress_line(plan: &Plan, r: &RunRecord) -> String {
    let s = &plan.suite;
    let what = format!(
        "[benchctl] round {}/{} | {} | {}",
        r.round,
        plan.cfg.rounds,
        s.workloads[r.workload].label(),
        s.variants[r.variant].label
    );
    match &r.result {
        Ok(res) => {
            let m = res.metrics();
            let shown: Vec<String> = s
                .columns
                .iter()
                .take(3)
                .filter_map(|c| m.get(c.key).map(|x| format!("{}={x:.1}", c.key)))
                .collect();
            format!("{what}: {}", shown.join(" "))
        }
        Err(e) => format!("{what}: FAILED: {e}"),
    }
}

/// Writes to stdout, ignoring a closed pipe (e.g. `benchctl … | head`).
fn emit(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn dry_run(plan: &Plan) -> ExitCode {
    let mut out = format!(
        "# dry run: suite `{}`, {} rounds (PORT increments per measurement)\n",
        plan.suite.name, plan.cfg.rounds
    );
    for w in 0..plan.suite.workloads.len() {
        for v in 0..plan.suite.variants.len() {
            let port = plan.cfg.port_base;
            out.push_str(&format!(
                "# {} / {}\n",
                plan.suite.workloads[w].label(),
                plan.suite.variants[v].label
            ));
            match (
                plan.server_command(w, v, port),
                plan.client_command(w, v, port, "$SERVER_PID"),
            ) {
                (Ok(s), Ok(c)) => out.push_str(&format!("{s}\n{c}\n")),
                (Err(e), _) | (_, Err(e)) => {
                    eprintln!("benchctl: {e}");
                    return ExitCode::from(2);
                }
            }
        }
    }
    if let Ok(warnings) = plan.validate() {
        for w in warnings {
            out.push_str(&format!("# warning: {w}\n"));
        }
    }
    emit(&out);
    ExitCode::SUCCESS
}

fn run(plan: &Plan, json_out: Option<PathBuf>) -> ExitCode {
    let warnings = match plan.validate() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("benchctl: {e}");
            return ExitCode::from(2);
        }
    };
    for w in &warnings {
        eprintln!("benchctl: warning: {w}");
    }
    let mut json = match json_out
        .map(|p| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)
                .map_err(|e| (p, e))
        })
        .transpose()
    {
        Ok(f) => f,
        Err((p, e)) => {
            eprintln!("benchctl: cannot open {}: {e}", p.display());
            return ExitCode::from(2);
        }
    };
    let load_before = loadavg();
    let records = plan.execute(|r| {
        eprintln!("{}", progress_line(plan, r));
        if let Some(f) = json.as_mut() {
            let line = r.to_json(
                &plan.suite.workloads[r.workload].label(),
                &plan.suite.variants[r.variant].label,
            );
            let _ = writeln!(
                f,
                "{}",
                serde_json::json!({"suite": plan.suite.name, "run": line})
            );
        }
    });
    let records = match records {
        Ok(r) => r,
        Err(e) => {
            eprintln!("benchctl: {e}");
            return ExitCode::FAILURE;
        }
    };
    let ctx = ReportContext {
        rounds: plan.cfg.rounds,
        cores: online_cpus(),
        server_cpus: plan.cfg.server_cpus.clone(),
        client_cpus: plan.cfg.client_cpus.clone(),
        duration_ms: plan.cfg.duration_ms,
        warmup_ms: plan.cfg.warmup_ms,
        threads: plan.cfg.threads,
        load_before,
        load_after: loadavg(),
        warnings,
    };
    let rows = summary::summarize(&plan.suite, &records);
    emit(&summary::render(&plan.suite, &rows, &records, &ctx));
    if records.iter().all(|r| r.result.is_err()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    match cli::parse(Cli::parse(), &exe_dir()) {
        Err(e) => {
            eprintln!("benchctl: {e} (see benchctl --help)");
            ExitCode::from(2)
        }
        Ok(Command::List { catalog, vars }) => {
            let mut out = String::from("variables (override with --var KEY=VALUE):\n");
            for (k, v) in &vars {
                out.push_str(&format!("  {k} = {v}\n"));
            }
            out.push_str(
                "per run: port addr server_pid duration_ms warmup_ms threads shards workers \
                 accept accept_flag budget_msgs budget_flag conns depth size hot_conns \
                 hot_depth probe_size cycles\nservers (override with --server/--client NAME=TEMPLATE):\n",
            );
            for (name, def) in catalog.iter() {
                out.push_str(&format!("  {name}:\n    server: {}\n", def.server));
                if let Some(c) = &def.client {
                    out.push_str(&format!("    client: {c}\n"));
                }
            }
            emit(&out);
            ExitCode::SUCCESS
        }
        Ok(Command::Run {
            plan,
            dry_run: true,
            ..
        }) => dry_run(&plan),
        Ok(Command::Run { plan, json_out, .. }) => run(&plan, json_out),
    }
}
