//! The threads that do a pinned shard's blocking work (io_uring's kernel workers, the blocking
//! pool) stay off the shard's core where the process may use another: the shard's clients
//! would otherwise wait while its own file writes take its core.

use std::collections::BTreeSet;

use corewire_runtime::fs::OpenOptions;
use corewire_runtime::{spawn_blocking, Runtime};

/// A `Cpus_allowed_list` ("0-2,4") as a set.
fn parse_list(list: &str) -> BTreeSet<usize> {
    let mut cpus = BTreeSet::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap()),
            None => {
                cpus.insert(part.parse().unwrap());
            }
        }
    }
    cpus
}

fn allowed_of(task: &str) -> BTreeSet<usize> {
    let status = std::fs::read_to_string(format!("{task}/status")).unwrap_or_default();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or("");
    parse_list(line)
}

/// This process's threads whose name starts with `prefix`, with their CPU sets.
fn threads_named(prefix: &str) -> Vec<(String, BTreeSet<usize>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let task = entry.path().display().to_string();
        let comm = std::fs::read_to_string(format!("{task}/comm")).unwrap_or_default();
        if comm.starts_with(prefix) {
            found.push((comm.trim().to_string(), allowed_of(&task)));
        }
    }
    found
}

#[test]
fn a_pinned_shards_blocking_work_runs_off_its_core() {
    let allowed = allowed_of("/proc/thread-self");
    let shard_cpu = *allowed.iter().next().expect("some CPU is allowed");
    let rt = Runtime::builder()
        .shards(1)
        .cpus(vec![shard_cpu])
        .build()
        .unwrap();
    let uring = rt.backend() == corewire_runtime::Backend::IoUring;
    let dir = std::env::temp_dir().join(format!("corewire-helper-cpus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f");
    let pool_cpus = rt
        .run_on(0, move || async move {
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .open(&path)
                .await
                .unwrap();
            file.write_all_at(bytes::Bytes::from(vec![7u8; 1 << 20]), 0)
                .await
                .unwrap();
            // fsync always goes to io_uring's kernel workers (and to the pool on epoll).
            file.sync_all().await.unwrap();
            file.close().await.unwrap();
            spawn_blocking(|| allowed_of("/proc/thread-self"))
                .await
                .unwrap()
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let shard = threads_named("corewire-shard");
    assert_eq!(shard.len(), 1, "{shard:?}");
    assert_eq!(
        shard[0].1,
        BTreeSet::from([shard_cpu]),
        "the shard is pinned"
    );
    let workers = threads_named("iou-wrk");
    if uring {
        assert!(!workers.is_empty(), "the fsync ran on an io_uring worker");
    }
    if allowed.len() < 2 {
        // One CPU: nowhere else to go, and nothing was moved.
        assert_eq!(pool_cpus, allowed);
        for (name, cpus) in &workers {
            assert_eq!(cpus, &allowed, "{name}");
        }
        return;
    }
    let elsewhere: BTreeSet<usize> = allowed
        .iter()
        .copied()
        .filter(|&c| c != shard_cpu)
        .collect();
    assert_eq!(pool_cpus, elsewhere, "the blocking pool's thread");
    for (name, cpus) in &workers {
        assert_eq!(cpus, &elsewhere, "{name}");
    }
}
