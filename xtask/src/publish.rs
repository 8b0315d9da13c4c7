//! The crates as users get them, checked on a host without rdma-core, pkg-config or libclang
//! ([`hidden`]): every publishable crate packages (and its packaged sources
//! build), the docs build as docs.rs builds them, and a crate outside the workspace that
//! depends on `corewire` builds and runs its test.

use std::path::PathBuf;
use std::process::Command;

use crate::cmd::{self, Result};
use crate::hidden;
use crate::json::Json;
use crate::tally::{parse_result_line, Tally};

/// The crate outside the workspace that uses corewire as a user would.
pub const DOWNSTREAM: &str = "tests/downstream";

/// `cargo ARGS...` in the repository, inside the hiding namespace.
fn hidden_cargo<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let cargo = cmd::cargo();
    let mut c = hidden::command(cargo.get_program(), args);
    c.current_dir(cmd::repo_root());
    c
}

/// The workspace's packages that may be published (`publish` not `false`), from
/// `cargo metadata --no-deps` output.
pub fn publishable(metadata: &str) -> Result<Vec<String>> {
    let meta = Json::parse(metadata).map_err(|e| format!("cargo metadata: {e}"))?;
    let Some(Json::Array(packages)) = meta.get("packages") else {
        return Err("cargo metadata has no packages".into());
    };
    let mut names = Vec::new();
    for p in packages {
        let name = p.get("name").and_then(Json::as_str).unwrap_or_default();
        // `publish = false` is an empty registry list; absent (null) means crates.io.
        let unpublished = matches!(p.get("publish"), Some(Json::Array(r)) if r.is_empty());
        if !unpublished && !name.is_empty() {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

fn run_check(tally: &mut Tally, what: &str, c: &mut Command) {
    match cmd::run_streaming(c, None, |_| {}) {
        Ok(f) if f.status.success() => {}
        Ok(f) => tally.problem(format!("{what} failed ({})", f.status)),
        Err(e) => tally.problem(e),
    }
}

/// `cargo package` of every publishable crate together (cargo resolves their dependencies on
/// each other from the packages it just made), which also builds each from its packaged
/// sources. `--allow-dirty`: a local run with uncommitted changes checks them as they are.
pub fn check_package(tally: &mut Tally) {
    let names =
        match cmd::output(cmd::cargo().args(["metadata", "--format-version", "1", "--no-deps"]))
            .and_then(|m| publishable(&m))
        {
            Ok(n) => n,
            Err(e) => return tally.problem(e),
        };
    forget_unpacked(&names);
    let mut args = vec!["package".to_string(), "--allow-dirty".into()];
    for n in &names {
        args.push("-p".into());
        args.push(n.clone());
    }
    run_check(
        tally,
        &format!(
            "`cargo package` of {} with rdma-core and libclang hidden",
            names.join(", ")
        ),
        &mut hidden_cargo(&args),
    );
}

/// `cargo doc --no-deps` of every crate with every feature and rustdoc warnings (broken
/// links, malformed docs, missing docs where a crate asks for them) as errors, with
/// rdma-core and libclang hidden as on docs.rs.
pub fn check_docs(tally: &mut Tally) {
    let mut c = hidden_cargo(["doc", "--workspace", "--no-deps", "--all-features"]);
    c.env("RUSTDOCFLAGS", "-D warnings");
    run_check(
        tally,
        "`RUSTDOCFLAGS=-D warnings cargo doc --workspace --no-deps --all-features` with \
         rdma-core and libclang hidden",
        &mut c,
    );
}

/// Builds and tests tests/downstream with rdma-core and libclang hidden, in its own target
/// directory inside ours (kept between runs). Its lock file is the workspace's, copied, so it
/// builds with the versions the workspace is tested with.
pub fn check_downstream(tally: &mut Tally, test_args: &[String]) {
    let dir = cmd::repo_root().join(DOWNSTREAM);
    let target: PathBuf = match cmd::target_dir() {
        Ok(t) => t.join("downstream"),
        Err(e) => return tally.problem(e),
    };
    if let Err(e) = std::fs::copy(cmd::repo_root().join("Cargo.lock"), dir.join("Cargo.lock")) {
        return tally.problem(format!("copying Cargo.lock to {DOWNSTREAM}: {e}"));
    }
    let mut args: Vec<String> = ["test", "--manifest-path", "Cargo.toml"]
        .map(String::from)
        .to_vec();
    if !test_args.is_empty() {
        args.push("--".into());
        args.extend(test_args.iter().cloned());
    }
    let mut c = hidden_cargo(&args);
    c.current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .env("COREWIRE_DOWNSTREAM_NO_RDMA_CORE", "1");
    let mut ran = false;
    let finished = cmd::run_streaming(&mut c, None, |line| {
        if let Some(r) = parse_result_line(line) {
            ran |= r.passed + r.failed > 0;
            tally.add(r);
        }
    });
    let what = format!("{DOWNSTREAM} (cargo test with rdma-core and libclang hidden)");
    match finished {
        // A name filter may leave nothing to run.
        Ok(f) if f.status.success() && (ran || !test_args.is_empty()) => {}
        Ok(f) if f.status.success() => tally.problem(format!("{what} ran no test")),
        Ok(f) => tally.problem(format!("{what} failed ({})", f.status)),
        Err(e) => tally.problem(e),
    }
}

/// Cargo unpacks the packages it verifies against from its temporary local registry into
/// `$CARGO_HOME/registry/src/-<hash of the registry's path>/` and never unpacks a version
/// again once there: a later run from the same checkout path (a CI machine keeping its cargo
/// home) would build against the sources of an earlier commit. Those copies go first. Only
/// local registries' folders (named from a path, so starting with `-`) are touched; crates.io's
/// are not.
fn forget_unpacked(names: &[String]) {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(src) = home.map(|h| h.join("registry").join("src")) else {
        return;
    };
    let Ok(registries) = std::fs::read_dir(&src) else {
        return;
    };
    for registry in registries.flatten() {
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        let Ok(crates) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for unpacked in crates.flatten() {
            let dir = unpacked.file_name().to_string_lossy().into_owned();
            let ours = names.iter().any(|n| {
                dir.strip_prefix(n.as_str())
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
            });
            if ours {
                let _ = std::fs::remove_dir_all(unpacked.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_packages_that_may_be_published_are_packaged() {
        let meta = r#"{"packages":[
            {"name":"corewire","publish":null},
            {"name":"xtask","publish":[]},
            {"name":"corewire-verbs"},
            {"name":"internal","publish":["my-registry"]}
        ],"target_directory":"/t"}"#;
        assert_eq!(
            publishable(meta).unwrap(),
            ["corewire", "corewire-verbs", "internal"]
        );
    }
}
