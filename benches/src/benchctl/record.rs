//! What one measurement produced, and the numbers the summary reads from it.

use std::collections::BTreeMap;

use crate::stats_line::{max_deviation_pct, ShardLine};

/// A successful measurement.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The client's JSON report.
    pub report: serde_json::Value,
    /// `stats` lines the server printed on SIGTERM (empty for servers that print none).
    pub shards: Vec<ShardLine>,
    /// Irregularities worth showing next to the numbers (non-zero exits, forced kills).
    pub notes: Vec<String>,
    /// `metric` lines the server printed on SIGTERM ([`crate::server_metrics`]).
    pub server_metrics: Vec<(String, f64)>,
}

impl RunResult {
    /// Numeric report fields by key, plus `balance_max_dev_pct` when the server reported
    /// per-shard accepts (connections served per shard: `placed` where given).
    pub fn metrics(&self) -> BTreeMap<String, f64> {
        let mut metrics: BTreeMap<String, f64> = self
            .report
            .as_object()
            .map(|obj| {
                obj.iter()
                    .filter_map(|(k, v)| v.as_f64().map(|x| (k.clone(), x)))
                    .collect()
            })
            .unwrap_or_default();
        let accepted: Vec<u64> = self.shards.iter().map(|s| s.served()).collect();
        if let Some(dev) = max_deviation_pct(&accepted) {
            metrics.insert("balance_max_dev_pct".into(), dev);
        }
        metrics.extend(self.server_metrics.iter().cloned());
        metrics
    }

    /// Connections served per shard (`placed`, else `accepted`), ordered by shard index.
    pub fn accepted_per_shard(&self) -> Vec<u64> {
        let mut shards = self.shards.clone();
        shards.sort_by_key(|s| s.shard);
        shards.iter().map(|s| s.served()).collect()
    }
}

/// One measurement of one (workload, variant) in one round.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub round: usize,
    pub workload: usize,
    pub variant: usize,
    pub server_cmd: String,
    pub client_cmd: String,
    pub result: Result<RunResult, String>,
}

impl RunRecord {
    /// The record as one JSON line for `--json-out`.
    pub fn to_json(&self, workload: &str, variant: &str) -> serde_json::Value {
        let mut v = serde_json::json!({
            "round": self.round,
            "workload": workload,
            "variant": variant,
            "server_cmd": self.server_cmd,
            "client_cmd": self.client_cmd,
        });
        match &self.result {
            Ok(r) => {
                v["report"] = r.report.clone();
                v["shard_accepted"] = serde_json::json!(r.accepted_per_shard());
                // How often each shard's connections ran out of their fairness budget: the
                // fairness table needs it to tell "budget never bit" from "budget did not help".
                let mut shards = r.shards.clone();
                shards.sort_by_key(|s| s.shard);
                v["shard_budget_exhausted"] = serde_json::json!(shards
                    .iter()
                    .map(|s| s.budget_exhausted)
                    .collect::<Vec<_>>());
                v["notes"] = serde_json::json!(r.notes);
            }
            Err(e) => v["error"] = serde_json::json!(e),
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_take_numbers_and_derive_balance() {
        let r = RunResult {
            report: serde_json::json!({"qps": 10.5, "mode": "echo", "server_cpu_s": null}),
            shards: vec![
                ShardLine {
                    shard: 1,
                    accepted: 25,
                    ..ShardLine::default()
                },
                ShardLine {
                    shard: 0,
                    accepted: 75,
                    ..ShardLine::default()
                },
            ],
            notes: vec![],
            server_metrics: vec![("hol_p99".into(), 7.0)],
        };
        let m = r.metrics();
        assert_eq!(
            m["hol_p99"], 7.0,
            "the server's metric lines join the client's"
        );
        assert_eq!(m["qps"], 10.5);
        assert_eq!(m["balance_max_dev_pct"], 50.0);
        assert!(!m.contains_key("mode"));
        assert!(!m.contains_key("server_cpu_s"));
        assert_eq!(r.accepted_per_shard(), vec![75, 25]);
    }
}
