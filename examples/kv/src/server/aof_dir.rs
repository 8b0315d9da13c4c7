//! The AOF directory: each shard's log files (see [`crate::aof::Manifest`]) plus a manifest
//! recording the shard count. Keys are placed by `slot % shards`, so logs written with one
//! shard count cannot be replayed with another: start-up refuses instead of silently putting
//! keys on the wrong shard.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

const MANIFEST: &str = "corewire-kv.manifest";

/// Creates `dir` if needed and checks (or records) that its logs belong to `shards` shards.
pub(crate) fn prepare(dir: &Path, shards: usize) -> Result<(), String> {
    let fail = |what: &str, e: io::Error| format!("AOF directory {}: {what}: {e}", dir.display());
    fs::create_dir_all(dir).map_err(|e| fail("create", e))?;
    let manifest = dir.join(MANIFEST);
    match fs::read_to_string(&manifest) {
        Ok(text) => {
            let recorded = parse_manifest(&text)
                .ok_or_else(|| format!("{}: unreadable manifest {text:?}", manifest.display()))?;
            if recorded != shards {
                return Err(format!(
                    "the AOF in {} was written by {recorded} shards; start with --shards {recorded} \
                     (replaying with a different shard count is not supported)",
                    dir.display()
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(highest) = highest_shard_log(dir).map_err(|e| fail("list", e))? {
                if highest >= shards {
                    return Err(format!(
                        "{} holds shard-{highest}.aof but only {shards} shards were asked for",
                        dir.display()
                    ));
                }
            }
            write_manifest(dir, &manifest, shards).map_err(|e| fail("write manifest", e))
        }
        Err(e) => Err(fail("read manifest", e)),
    }
}

fn parse_manifest(text: &str) -> Option<usize> {
    text.lines()
        .find_map(|line| line.trim().strip_prefix("shards="))
        .and_then(|n| n.parse().ok())
}

/// The highest shard index among the files of shard logs (`shard-<i>.aof`,
/// `shard-<i>.manifest`, `shard-<i>.<seq>.base.aof`, ...).
fn highest_shard_log(dir: &Path) -> io::Result<Option<usize>> {
    let mut highest = None;
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let index = name
            .to_str()
            .and_then(|n| n.strip_prefix("shard-"))
            .and_then(|n| n.split_once('.'))
            .and_then(|(index, _)| index.parse::<usize>().ok());
        if let Some(index) = index {
            highest = highest.max(Some(index));
        }
    }
    Ok(highest)
}

/// Written to a temporary file and renamed, then the directory is synced, so a crash leaves
/// either no manifest or a complete one.
fn write_manifest(dir: &Path, manifest: &Path, shards: usize) -> io::Result<()> {
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    let mut file = fs::File::create(&tmp)?;
    writeln!(file, "shards={shards}")?;
    file.sync_all()?;
    fs::rename(&tmp, manifest)?;
    fs::File::open(dir)?.sync_all()
}

/// Makes the directory entries of newly created logs durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("kv-aofdir-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn manifest_pins_the_shard_count() {
        let dir = temp_dir("pin");
        prepare(&dir, 2).unwrap();
        prepare(&dir, 2).unwrap();
        let err = prepare(&dir, 3).unwrap_err();
        assert!(err.contains("--shards 2"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stray_logs_without_manifest_are_refused() {
        let dir = temp_dir("stray");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("shard-3.aof"), b"").unwrap();
        assert!(prepare(&dir, 2).is_err());
        fs::write(dir.join("shard-5.7.base.aof"), b"").unwrap();
        assert!(prepare(&dir, 4).is_err());
        prepare(&dir, 6).unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn manifest_parsing() {
        assert_eq!(parse_manifest("shards=4\n"), Some(4));
        assert_eq!(parse_manifest("nonsense"), None);
    }
}
