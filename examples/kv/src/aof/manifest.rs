//! Which files make up a shard's log, in replay order: an optional base (the image the last
//! rewrite wrote) and one or more incremental files, the last of which is being appended
//! to. Redis 7's multi-part AOF, one per shard.
//!
//! ```text
//! # corewire-kv AOF manifest for one shard: replay these files in this order
//! seq 3
//! base shard-0.3.base.aof
//! incr shard-0.3.incr.aof
//! ```
//!
//! The manifest is replaced only by writing a new one next to it and renaming it over the old
//! (then syncing the directory), so a crash leaves one complete manifest or the other. A
//! shard without a manifest has one incremental file, `shard-<i>.aof` (the layout before the
//! first rewrite).

use std::fmt::Write;

/// One shard's list of log files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    shard: usize,
    /// Highest sequence number used in a file name so far.
    seq: u64,
    base: Option<String>,
    /// Never empty; the last one is the file being appended to.
    incrs: Vec<String>,
}

/// Why a manifest could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadManifest(pub String);

impl std::fmt::Display for BadManifest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadManifest {}

impl Manifest {
    /// The manifest's own file name.
    pub fn file_name(shard: usize) -> String {
        format!("shard-{shard}.manifest")
    }

    /// A shard that never rewrote its log: just `shard-<i>.aof`.
    pub fn initial(shard: usize) -> Manifest {
        Manifest {
            shard,
            seq: 0,
            base: None,
            incrs: vec![format!("shard-{shard}.aof")],
        }
    }

    pub fn parse(shard: usize, text: &str) -> Result<Manifest, BadManifest> {
        let bad = |why: String| BadManifest(format!("{}: {why}", Manifest::file_name(shard)));
        let mut manifest = Manifest {
            shard,
            seq: 0,
            base: None,
            incrs: Vec::new(),
        };
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (word, value) = line
                .split_once(' ')
                .ok_or_else(|| bad(format!("unreadable line {line:?}")))?;
            match word {
                "seq" => {
                    manifest.seq = value
                        .parse()
                        .map_err(|_| bad(format!("bad sequence number {value:?}")))?;
                }
                "base" | "incr" => {
                    if !is_plain_name(value) {
                        return Err(bad(format!("bad file name {value:?}")));
                    }
                    if word == "base" {
                        if manifest.base.is_some() || !manifest.incrs.is_empty() {
                            return Err(bad("the base must come first, once".into()));
                        }
                        manifest.base = Some(value.to_owned());
                    } else {
                        manifest.incrs.push(value.to_owned());
                    }
                }
                _ => return Err(bad(format!("unknown entry {line:?}"))),
            }
        }
        if manifest.incrs.is_empty() {
            return Err(bad("no incremental file".into()));
        }
        Ok(manifest)
    }

    pub fn render(&self) -> String {
        let mut out = String::from(
            "# corewire-kv AOF manifest for one shard: replay these files in this order\n",
        );
        let _ = writeln!(out, "seq {}", self.seq);
        if let Some(base) = &self.base {
            let _ = writeln!(out, "base {base}");
        }
        for incr in &self.incrs {
            let _ = writeln!(out, "incr {incr}");
        }
        out
    }

    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// Every file, in replay order.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.base.iter().chain(&self.incrs).map(String::as_str)
    }

    /// The file being appended to.
    pub fn current(&self) -> &str {
        self.incrs.last().map_or("", String::as_str)
    }

    /// Names for the next rewrite's files: (base, incremental).
    pub fn next_names(&self) -> (String, String) {
        let seq = self.seq + 1;
        (
            format!("shard-{}.{seq}.base.aof", self.shard),
            format!("shard-{}.{seq}.incr.aof", self.shard),
        )
    }

    /// At the start of a rewrite: the same files plus a new incremental one, which takes
    /// every write from the moment the rewrite's image is taken.
    pub fn with_new_incr(&self) -> Manifest {
        let (_, incr) = self.next_names();
        let mut next = self.clone();
        next.seq += 1;
        next.incrs.push(incr);
        next
    }

    /// When the rewrite is done: its base (the image) and the incremental files from the
    /// image on (`self` is the manifest from [`Self::with_new_incr`]).
    pub fn rewritten(&self) -> Manifest {
        let base = format!("shard-{}.{}.base.aof", self.shard, self.seq);
        Manifest {
            shard: self.shard,
            seq: self.seq,
            base: Some(base),
            incrs: vec![self.current().to_owned()],
        }
    }
}

/// Whether `name` is a file name in the directory (no path, nothing hidden).
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\0'])
        && !name.contains(char::is_whitespace)
}

/// Whether `name` looks like a log file of `shard` (current or left over by a rewrite),
/// so files the manifest no longer names can be recognised and removed.
pub fn is_log_file_of(shard: usize, name: &str) -> bool {
    let Some(rest) = name.strip_prefix(&format!("shard-{shard}.")) else {
        return false;
    };
    rest == "aof"
        || rest
            .strip_suffix(".base.aof")
            .or_else(|| rest.strip_suffix(".incr.aof"))
            .is_some_and(|seq| !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewrite_adds_an_incr_then_replaces_everything_before_it() {
        let initial = Manifest::initial(2);
        assert_eq!(initial.files().collect::<Vec<_>>(), ["shard-2.aof"]);
        let during = initial.with_new_incr();
        assert_eq!(
            during.files().collect::<Vec<_>>(),
            ["shard-2.aof", "shard-2.1.incr.aof"]
        );
        assert_eq!(during.current(), "shard-2.1.incr.aof");
        let done = during.rewritten();
        assert_eq!(
            done.files().collect::<Vec<_>>(),
            ["shard-2.1.base.aof", "shard-2.1.incr.aof"]
        );
        // A failed rewrite leaves `during`; the next one stacks another incr on it.
        let again = during.with_new_incr();
        assert_eq!(again.files().count(), 3);
        assert_eq!(
            again.rewritten().files().collect::<Vec<_>>(),
            ["shard-2.2.base.aof", "shard-2.2.incr.aof"]
        );
        for manifest in [initial, during, done, again] {
            assert_eq!(Manifest::parse(2, &manifest.render()), Ok(manifest));
        }
    }

    #[test]
    fn bad_manifests_are_refused() {
        for text in [
            "",
            "seq 1\n",
            "incr ../etc/passwd\n",
            "incr a b\n",
            "incr shard-0.aof\nbase shard-0.1.base.aof\n",
            "seq x\nincr a\n",
            "what a\n",
        ] {
            assert!(Manifest::parse(0, text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn log_files_are_recognised() {
        for name in ["shard-1.aof", "shard-1.3.base.aof", "shard-1.12.incr.aof"] {
            assert!(is_log_file_of(1, name), "{name}");
        }
        for name in [
            "shard-10.aof",
            "shard-1.manifest",
            "shard-1.aof.cut-5",
            "shard-1..incr.aof",
            "shard-1.x.base.aof",
            "corewire-kv.manifest",
        ] {
            assert!(!is_log_file_of(1, name), "{name}");
        }
    }
}
