//! `nodes.conf` on disk: read once at start-up, rewritten (through the shard's ring) after
//! every configuration change, before the change is acknowledged. A new version goes to a
//! temporary file that is synced and renamed over the old one, so a crash leaves either
//! version whole. A `<file>.lock` held with `flock` keeps two nodes off one file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use corewire::runtime::fs::File as RingFile;

use super::super::config::ClusterConfig;
use crate::cluster::node::{NodeAddr, NodeId};
use crate::cluster::{nodes_conf, Topology};

/// The node's configuration file, locked for this process.
pub(crate) struct ConfFile {
    path: PathBuf,
    /// Held for the life of the process (the lock goes with the descriptor).
    _lock: File,
}

fn fail(path: &Path, what: &str, error: impl std::fmt::Display) -> String {
    format!("cluster config file {}: {what}: {error}", path.display())
}

/// The saved configuration, or a new node (with a new random id) when there is none.
/// `addr`: this node's address now; it replaces the saved one (ports may have changed).
pub(crate) fn load_or_create(
    config: &ClusterConfig,
    addr: NodeAddr,
) -> Result<(Topology, ConfFile), String> {
    let path = config.config_file.clone();
    let lock = lock(&path)?;
    let topology = match fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => {
            let mut topology = nodes_conf::parse(&text, config.node_timeout_ms)
                .map_err(|e| fail(&path, "unreadable (fix or remove it)", e))?;
            topology.update_my_addr(addr);
            topology
        }
        Ok(_) => new_node(config, addr)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => new_node(config, addr)?,
        Err(e) => return Err(fail(&path, "read", e)),
    };
    let mut topology = topology;
    topology.set_options(config.require_full_coverage, config.replica_no_failover);
    Ok((topology, ConfFile { path, _lock: lock }))
}

/// A fresh node id from the OS's random source.
pub(crate) fn random_node_id() -> Result<NodeId, String> {
    let mut random = [0u8; 20];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut random))
        .map_err(|e| format!("reading /dev/urandom for a node id: {e}"))?;
    Ok(NodeId::from_random(random))
}

fn new_node(config: &ClusterConfig, addr: NodeAddr) -> Result<Topology, String> {
    let id = random_node_id()?;
    tracing::info!(node = %id, "new cluster node");
    Ok(Topology::new(id, addr, config.node_timeout_ms))
}

fn lock(path: &Path) -> Result<File, String> {
    let mut lock_path = path.as_os_str().to_owned();
    lock_path.push(".lock");
    let lock_path = PathBuf::from(lock_path);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| fail(path, "creating its lock file", e))?;
    if file.try_lock().is_err() {
        return Err(fail(
            path,
            "locked",
            "another corewire-kv node uses it (give each node its own --cluster-config-file)",
        ));
    }
    Ok(file)
}

impl ConfFile {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `text` as the new file, durably, through the ring (write, sync, rename, directory
    /// sync).
    pub async fn save(&self, text: String) -> io::Result<()> {
        let mut tmp = self.path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let file = RingFile::create(&tmp).await?;
        file.write_all_at(Bytes::from(text), 0).await?;
        file.sync_all().await?;
        file.close().await?;
        corewire::runtime::fs::rename(&tmp, &self.path).await?;
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        RingFile::open(dir).await?.sync_all().await
    }
}
