//! CPU time of named threads, for the RDMA examples that report server and client CPU of one
//! process (shared by `rdma_perf` and `rdma_fairness` through `#[path]`).

/// CPU seconds used so far by this process's threads whose name starts with `prefix`.
pub fn thread_cpu_seconds(prefix: &str) -> f64 {
    let mut ticks = 0u64;
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    for entry in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(prefix) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        // utime and stime are fields 14 and 15 of the line (11 and 12 after the comm).
        let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        ticks += field(11).unwrap_or(0) + field(12).unwrap_or(0);
    }
    ticks as f64 / 100.0 // USER_HZ
}
