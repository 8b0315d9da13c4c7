//! `corewire-kv`'s command line as a user meets it: `--help` lists every option of the table
//! with its default, `--version` answers, a mistake is clap's error (with a suggestion for a
//! misspelt flag) before anything starts, and redis-server's spellings keep working.

mod common;

use std::process::{Command, Output};

use common::{Reply, Server};
use corewire_kv::config::table::OPTIONS;

fn run(args: &[&str]) -> Output {
    Command::new(common::SERVER)
        .args(args)
        .output()
        .expect("running corewire-kv")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `--help`'s entry for `--name`: its line and the lines under it, up to the next flag.
fn entry(help: &str, name: &str) -> Option<String> {
    let flag = format!("--{name}");
    let mut lines = help.lines().skip_while(|line| {
        let line = line.trim_start();
        !(line == flag || line.starts_with(&format!("{flag} ")))
    });
    let first = lines.next()?;
    let rest = lines.take_while(|line| !line.trim_start().starts_with('-'));
    Some(
        std::iter::once(first)
            .chain(rest)
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[test]
fn help_lists_every_option_with_its_default() {
    let output = run(&["--help"]);
    assert!(output.status.success(), "{output:?}");
    let help = text(&output.stdout);
    assert!(help.starts_with("corewire's sharded"), "{help}");
    assert!(
        help.contains("Usage: corewire-kv [/path/to/redis.conf]"),
        "{help}"
    );
    for spec in OPTIONS {
        let entry = entry(&help, spec.name)
            .unwrap_or_else(|| panic!("--{} is not listed:\n{help}", spec.name));
        // clap quotes a default that is empty or has spaces.
        let default = match spec.default {
            text if text.is_empty() || text.contains(' ') => format!("{text:?}"),
            text => text.to_owned(),
        };
        assert!(
            entry.contains(&format!("[default: {default}]")),
            "--{}'s default {default} is not shown:\n{entry}",
            spec.name
        );
        if !spec.help.is_empty() {
            assert!(entry.contains(spec.help), "--{}: {entry}", spec.name);
        }
        if let Some(alias) = spec.alias {
            assert!(entry.contains(&format!("--{alias}")), "{entry}");
        }
    }
    assert_eq!(text(&run(&["-h"]).stdout), help, "-h is --help");
}

#[test]
fn version_answers() {
    for flag in ["--version", "-v"] {
        let output = run(&[flag]);
        assert!(output.status.success(), "{output:?}");
        let stdout = text(&output.stdout);
        assert!(
            stdout.starts_with(&format!(
                "corewire-kv {} (Redis ",
                env!("CARGO_PKG_VERSION")
            )),
            "{stdout}"
        );
    }
}

#[test]
fn an_unknown_flag_is_refused_with_a_suggestion() {
    let output = run(&["--port", "0", "--maxmemroy", "1mb"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stdout.is_empty(), "it started: {output:?}");
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with("error: unexpected argument '--maxmemroy' found"),
        "{stderr}"
    );
    assert!(
        stderr.contains("tip: a similar argument exists: '--maxmemory'"),
        "{stderr}"
    );
    assert!(stderr.contains("Usage: corewire-kv"), "{stderr}");
    // A missing value, and a second value for a one-value option, too.
    let stderr = text(&run(&["--port"]).stderr);
    assert!(
        stderr.contains("a value is required for '--port <N>'"),
        "{stderr}"
    );
    let output = run(&["--port", "6379", "6380"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        text(&output.stderr).contains("unexpected argument '6380'"),
        "{output:?}"
    );
}

#[test]
fn redis_servers_spellings_keep_working() {
    let aof = common::TempDir::new("cli-aof");
    let aof = aof.path().to_str().expect("a UTF-8 temporary path");
    let server = Server::start(&[
        "--shards",
        "1",
        "--BIND",
        "127.0.0.1",
        "-::1",
        "--save",
        "--maxmemory 2mb",
        "--pin",
        "--no-pin",
        "--aof",
        aof,
        "--fsync",
        "always",
        "--oom-score-adj-values",
        "0",
        "-100",
        "800",
    ]);
    let mut conn = server.connect();
    for (name, value) in [
        ("bind", "127.0.0.1 -::1"),
        ("save", ""),
        ("maxmemory", "2097152"),
        ("pin", "no"),
        ("appendfsync", "always"),
        ("oom-score-adj-values", "0 -100 800"),
    ] {
        assert_eq!(
            conn.call(&["CONFIG", "GET", name]),
            Reply::Array(Some(vec![Reply::bulk(name), Reply::bulk(value)])),
            "{name}"
        );
    }
}
