//! Medians across rounds and the markdown report.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::record::RunRecord;
use super::suite::{Column, Suite};

/// Median of `values` (mean of the middle two for even counts); `None` when empty.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

/// One table row: a (workload, variant) pair summarised over its rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub workload: usize,
    pub variant: usize,
    pub ok: usize,
    pub total: usize,
    pub medians: BTreeMap<String, f64>,
    /// Sum over rounds, not a median: any error is worth seeing.
    pub errors: f64,
    /// Median accepted count per shard index.
    pub shard_accepted: Vec<f64>,
}

/// Rows in workload-major order, variants in suite order.
pub fn summarize(suite: &Suite, records: &[RunRecord]) -> Vec<Row> {
    let mut rows = Vec::new();
    for w in 0..suite.workloads.len() {
        for v in 0..suite.variants.len() {
            let mine: Vec<&RunRecord> = records
                .iter()
                .filter(|r| r.workload == w && r.variant == v)
                .collect();
            let ok: Vec<_> = mine.iter().filter_map(|r| r.result.as_ref().ok()).collect();
            let mut samples: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            let mut shard_samples: Vec<Vec<f64>> = Vec::new();
            for result in &ok {
                for (k, x) in result.metrics() {
                    samples.entry(k).or_default().push(x);
                }
                for (i, a) in result.accepted_per_shard().into_iter().enumerate() {
                    if shard_samples.len() <= i {
                        shard_samples.resize(i + 1, Vec::new());
                    }
                    shard_samples[i].push(a as f64);
                }
            }
            let errors = samples.get("errors").map_or(0.0, |e| e.iter().sum());
            rows.push(Row {
                workload: w,
                variant: v,
                ok: ok.len(),
                total: mine.len(),
                medians: samples
                    .into_iter()
                    .filter_map(|(k, mut xs)| median(&mut xs).map(|m| (k, m)))
                    .collect(),
                errors,
                shard_accepted: shard_samples
                    .into_iter()
                    .filter_map(|mut xs| median(&mut xs))
                    .collect(),
            });
        }
    }
    rows
}

/// Everything about the run the report states besides the numbers.
#[derive(Debug, Clone, Default)]
pub struct ReportContext {
    pub rounds: usize,
    pub cores: usize,
    pub server_cpus: Option<String>,
    pub client_cpus: Option<String>,
    pub duration_ms: u64,
    pub warmup_ms: u64,
    pub threads: usize,
    pub load_before: String,
    pub load_after: String,
    pub warnings: Vec<String>,
}

fn fmt_num(x: f64, decimals: usize) -> String {
    format!("{x:.decimals$}")
}

fn cell(row: &Row, c: &Column) -> String {
    row.medians
        .get(c.key)
        .map_or("–".to_string(), |x| fmt_num(*x, c.decimals))
}

fn ratio(row: &Row, base: Option<&Row>, c: &Column) -> String {
    let value = row.medians.get(c.key);
    let base = base.and_then(|b| b.medians.get(c.key));
    match (value, base) {
        (Some(v), Some(b)) if *b != 0.0 => format!("{}×", fmt_num(v / b, c.decimals)),
        _ => "–".to_string(),
    }
}

/// The markdown report: context, the table of medians with ratios, commands, failures.
pub fn render(suite: &Suite, rows: &[Row], records: &[RunRecord], ctx: &ReportContext) -> String {
    let mut md = String::new();
    let pin = |p: &Option<String>| {
        p.as_deref()
            .map_or("unpinned".to_string(), |c| format!("taskset -c {c}"))
    };
    let _ = writeln!(
        md,
        "## Suite `{}`: medians of {} rounds\n",
        suite.name, ctx.rounds
    );
    let _ = writeln!(
        md,
        "- Machine: {} CPUs online; **client and server share them** (all traffic on 127.0.0.1).",
        ctx.cores
    );
    let _ = writeln!(
        md,
        "- Server: {}; client: {}, {} client thread(s).",
        pin(&ctx.server_cpus),
        pin(&ctx.client_cpus),
        ctx.threads
    );
    if suite
        .workloads
        .iter()
        .any(|w| w.is_closed_loop() || matches!(w, super::suite::Workload::Probe { .. }))
    {
        let _ = writeln!(
            md,
            "- Window: {} ms measured after {} ms warm-up; a fresh server per measurement; rounds interleave variants.",
            ctx.duration_ms, ctx.warmup_ms
        );
    }
    let _ = writeln!(
        md,
        "- Load average before / after: {} / {}.",
        ctx.load_before, ctx.load_after
    );
    let _ = writeln!(
        md,
        "- Ratios are row median / baseline median (`{}`) for the same workload.",
        suite.baselines().join("`, `")
    );
    for w in &ctx.warnings {
        let _ = writeln!(md, "- **Warning:** {w}");
    }
    let show_shards = rows.iter().any(|r| !r.shard_accepted.is_empty())
        && suite.columns.iter().any(|c| c.key == "balance_max_dev_pct");

    let mut header = vec!["workload".to_string(), "variant".into(), "runs".into()];
    header.extend(suite.columns.iter().map(|c| c.header.to_string()));
    if show_shards {
        header.push("conns/shard".into());
    }
    header.push("errors (sum)".into());
    let baselines = suite.baselines();
    for b in &baselines {
        header.extend(suite.ratios.iter().map(|c| format!("{} vs {b}", c.header)));
    }
    let _ = writeln!(md, "\n| {} |", header.join(" | "));
    let _ = writeln!(md, "|{}", " --- |".repeat(header.len()));
    for row in rows {
        let variant = &suite.variants[row.variant];
        let mut cells = vec![
            suite.workloads[row.workload].label(),
            variant.label.clone(),
            format!("{}/{}", row.ok, row.total),
        ];
        cells.extend(suite.columns.iter().map(|c| cell(row, c)));
        if show_shards {
            let per: Vec<String> = row.shard_accepted.iter().map(|a| fmt_num(*a, 0)).collect();
            cells.push(if per.is_empty() {
                "–".into()
            } else {
                per.join(" / ")
            });
        }
        cells.push(fmt_num(row.errors, 0));
        for label in &baselines {
            let base = rows
                .iter()
                .find(|b| b.workload == row.workload && &suite.variants[b.variant].label == label);
            cells.extend(suite.ratios.iter().map(|c| ratio(row, base, c)));
        }
        let _ = writeln!(md, "| {} |", cells.join(" | "));
    }

    let _ = writeln!(
        md,
        "\n### Commands (first round; later rounds differ only in PORT and server pid)\n"
    );
    let _ = writeln!(md, "```sh");
    for w in 0..suite.workloads.len() {
        for v in 0..suite.variants.len() {
            if let Some(r) = records.iter().find(|r| r.workload == w && r.variant == v) {
                let _ = writeln!(
                    md,
                    "# {} / {}\n{}\n{}",
                    suite.workloads[w].label(),
                    suite.variants[v].label,
                    r.server_cmd,
                    r.client_cmd
                );
            }
        }
    }
    let _ = writeln!(md, "```");

    let problems: Vec<String> = records
        .iter()
        .filter_map(|r| {
            let what = format!(
                "round {} / {} / {}",
                r.round,
                suite.workloads[r.workload].label(),
                suite.variants[r.variant].label
            );
            match &r.result {
                Err(e) => Some(format!("- {what}: **failed**: {e}")),
                Ok(res) if !res.notes.is_empty() => {
                    Some(format!("- {what}: {}", res.notes.join("; ")))
                }
                Ok(_) => None,
            }
        })
        .collect();
    if !problems.is_empty() {
        let _ = writeln!(md, "\n### Irregular runs\n\n{}", problems.join("\n"));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchctl::record::RunResult;
    use crate::benchctl::suite::{build, SuiteOptions};
    use crate::stats_line::ShardLine;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    fn record(round: usize, variant: usize, qps: f64, errors: u64) -> RunRecord {
        RunRecord {
            round,
            workload: 0,
            variant,
            server_cmd: format!("srv{variant}"),
            client_cmd: "cli".into(),
            result: Ok(RunResult {
                report: serde_json::json!({"qps": qps, "p99_us": 10.0 * (variant + 1) as f64, "errors": errors}),
                shards: vec![ShardLine {
                    shard: 0,
                    accepted: 7,
                    ..ShardLine::default()
                }],
                notes: vec![],
                server_metrics: vec![],
            }),
        }
    }

    #[test]
    fn rows_hold_medians_error_sums_and_ratios_render() {
        let opts = SuiteOptions {
            servers: Some(vec!["corewire".into(), "tokio".into()]),
            ..SuiteOptions::default()
        };
        let suite = build("echo", &opts).unwrap();
        let mut records = vec![
            record(1, 0, 300.0, 0),
            record(2, 0, 100.0, 1),
            record(3, 0, 200.0, 0),
            record(1, 1, 100.0, 0),
        ];
        records.push(RunRecord {
            result: Err("server exited early".into()),
            ..record(2, 1, 0.0, 0)
        });
        let rows = summarize(&suite, &records);
        let first = &rows[0];
        assert_eq!((first.ok, first.total), (3, 3));
        assert_eq!(first.medians["qps"], 200.0);
        assert_eq!(first.errors, 1.0);
        assert_eq!(first.shard_accepted, vec![7.0]);
        assert_eq!((rows[1].ok, rows[1].total), (1, 2));
        // Workloads without records still get (empty) rows.
        assert_eq!(rows[2].total, 0);

        let md = render(&suite, &rows, &records, &ReportContext::default());
        assert!(
            md.contains("| 1 conn × depth 1, 64 B | corewire | 3/3 | 200 |"),
            "{md}"
        );
        assert!(md.contains("| 2.00× | 0.50× |"), "{md}");
        assert!(md.contains("**failed**: server exited early"), "{md}");
        assert!(md.contains("srv0\ncli"), "{md}");
    }
}
