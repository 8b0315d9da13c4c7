//! `corewire-kv /path/redis.conf [--name value ...]`: Redis's configuration file format
//! (quoting, `include`, multi-argument directives, memory units) with Redis's option names,
//! command-line options over the file, unknown or unsupported directives refused at start
//! with the list of them, and CONFIG REWRITE keeping the file's comments and order.

mod common;

use std::path::Path;

use common::{Reply, Server, TempDir};

fn write(dir: &TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("writing a config file");
    path
}

fn get(server: &Server, name: &str) -> String {
    get_on(&mut server.connect(), name)
}

fn get_on(conn: &mut common::Resp, name: &str) -> String {
    match conn.call(&["CONFIG", "GET", name]) {
        Reply::Array(Some(items)) => match items.as_slice() {
            [_, Reply::Bulk(Some(value))] => String::from_utf8_lossy(value).into_owned(),
            other => panic!("CONFIG GET {name}: {other:?}"),
        },
        other => panic!("CONFIG GET {name}: {other:?}"),
    }
}

/// The exit status and stderr of a start that must fail.
fn refused(config: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new(common::SERVER)
        .arg(config)
        .args(args)
        .output()
        .expect("running corewire-kv");
    assert!(!output.status.success(), "it started");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_redis_conf_is_read_with_redis_rules() {
    let dir = TempDir::new("conf");
    write(
        &dir,
        "extra.conf",
        "# included\nslowlog-max-len 77\nnotify-keyspace-events \"KEA\"\n",
    );
    let main = write(
        &dir,
        "redis.conf",
        &format!(
            "# Redis configuration\n\
             \n\
             maxmemory 1gb\n\
             maxmemory-policy allkeys-lru\n\
             save \"\"\n\
             client-output-buffer-limit pubsub 32mb 8mb 60\n\
             requirepass 'se cr\"et'\n\
             slowlog-log-slower-than 5000\n\
             latency-tracking-info-percentiles \"50 99 99.9\"\n\
             hash-max-ziplist-entries 64\n\
             include {}\n\
             appendfsync everysec\n",
            dir.path().join("extra.conf").display()
        ),
    );
    let server =
        Server::try_start_with_config(&main, &["--shards", "2", "--slowlog-max-len", "88"])
            .expect("the file is accepted");
    let mut conn = server.connect();
    assert_eq!(
        conn.call(&["AUTH", "se cr\"et"]),
        Reply::ok(),
        "single-quoted value with a space and a double quote"
    );
    let mut get = |name: &str| get_on(&mut conn, name);
    assert_eq!(get("maxmemory"), "1073741824");
    assert_eq!(get("maxmemory-policy"), "allkeys-lru");
    assert_eq!(get("save"), "");
    assert_eq!(
        get("client-output-buffer-limit"),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    );
    assert_eq!(get("slowlog-log-slower-than"), "5000");
    assert_eq!(
        get("hash-max-listpack-entries"),
        "64",
        "the old name sets the new option"
    );
    assert_eq!(get("latency-tracking-info-percentiles"), "50 99 99.9");
    assert_eq!(
        get("notify-keyspace-events"),
        "AKE",
        "from the included file"
    );
    assert_eq!(
        get("slowlog-max-len"),
        "88",
        "the command line wins over the files"
    );
}

#[test]
fn unknown_and_unsupported_directives_are_listed_at_start() {
    let dir = TempDir::new("conf-bad");
    let config = write(
        &dir,
        "redis.conf",
        "port 0\nnosuch-directive 1\nmaxmemory lots\nanother-unknown a b\nmaxmemory-policy allkeys-lru\n",
    );
    let stderr = refused(&config, &[]);
    for wanted in ["nosuch-directive", "another-unknown", "maxmemory"] {
        assert!(stderr.contains(wanted), "{wanted} not reported:\n{stderr}");
    }
    assert!(
        !stderr.contains("maxmemory-policy"),
        "a good line reported:\n{stderr}"
    );
    // An option this server cannot honour is refused rather than ignored.
    let strict = write(&dir, "strict.conf", "port 0\ndaemonize yes\n");
    let stderr = refused(&strict, &[]);
    assert!(stderr.contains("daemonize"), "{stderr}");
    // A missing include, and an unknown command-line option, too.
    let include = write(&dir, "include.conf", "include /nonexistent/redis.conf\n");
    assert!(refused(&include, &[]).contains("/nonexistent/redis.conf"));
    assert!(
        refused(&strict, &["--daemonize", "no", "--no-such-flag", "1"]).contains("no-such-flag")
    );
}

#[test]
fn config_rewrite_keeps_comments_and_order() {
    let dir = TempDir::new("conf-rewrite");
    let original = "# My settings\n\
                    maxmemory 100mb\n\
                    \n\
                    # Eviction\n\
                    maxmemory-policy allkeys-lru\n\
                    slowlog-max-len 128\n";
    let config = write(&dir, "redis.conf", original);
    let server = Server::try_start_with_config(&config, &["--shards", "2"]).expect("started");
    let mut conn = server.connect();
    for (name, value) in [
        ("maxmemory", "200mb"),
        ("slowlog-max-len", "128"),
        ("notify-keyspace-events", "Ex"),
        ("maxmemory-policy", "noeviction"),
    ] {
        assert_eq!(conn.call(&["CONFIG", "SET", name, value]), Reply::ok());
    }
    assert_eq!(conn.call(&["CONFIG", "REWRITE"]), Reply::ok());
    let text = std::fs::read_to_string(&config).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "# My settings");
    assert_eq!(lines[1], "maxmemory 200mb");
    assert_eq!(lines[3], "# Eviction");
    // A line of the file is rewritten in place even at the default, as Redis does.
    assert_eq!(lines[4], "maxmemory-policy noeviction");
    assert_eq!(lines[5], "slowlog-max-len 128");
    let generated = text
        .find("# Generated by CONFIG REWRITE")
        .expect("Redis's marker for new lines");
    assert!(
        text[generated..].contains("notify-keyspace-events \"xE\""),
        "{text}"
    );
    // Command-line settings too; this server's own options as plain words.
    assert!(text[generated..].contains("\nshards 2\n"), "{text}");
    // The file it wrote starts a server with the same settings.
    drop(conn);
    drop(server);
    let again = Server::try_start_with_config(&config, &["--shards", "1"]).expect("restarted");
    assert_eq!(get(&again, "maxmemory"), "209715200");
    assert_eq!(get(&again, "notify-keyspace-events"), "xE");
}

#[test]
fn command_line_options_use_redis_names_and_old_flags_still_work() {
    let server = Server::start(&[
        "--shards",
        "2",
        "--maxmemory",
        "10mb",
        "--maxmemory-policy",
        "allkeys-lfu",
        "--notify-keyspace-events",
        "KEA",
        "--save",
        "",
        "--hz",
        "20",
    ]);
    assert_eq!(get(&server, "maxmemory"), "10485760");
    assert_eq!(get(&server, "maxmemory-policy"), "allkeys-lfu");
    assert_eq!(get(&server, "notify-keyspace-events"), "AKE");
    assert_eq!(get(&server, "hz"), "20");
    // Without a file there is nothing to rewrite.
    assert_eq!(
        server.connect().call(&["CONFIG", "REWRITE"]),
        Reply::Error("ERR The server is running without a config file".into())
    );
}
