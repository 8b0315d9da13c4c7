//! redis-py's `RedisCluster` (Debian's python3-redis) against three corewire-kv nodes:
//! 100k keys written and read back across the cluster (`tests/py/cluster_100k.py`).

mod cluster_util;
mod common;

use std::process::{Command, Stdio};

use cluster_util::{require_redis_py_cluster, Cluster, PYTHON};

#[test]
fn redis_py_cluster_client_writes_and_reads_100k_keys() {
    require_redis_py_cluster();
    let cluster = Cluster::start(3, None);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/cluster_100k.py");
    let out = Command::new(PYTHON)
        .args([script, &cluster.ports()[1].to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("running the redis-py script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("OK 100000 keys"),
        "redis-py script failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cluster.check().expect("still consistent");
}
