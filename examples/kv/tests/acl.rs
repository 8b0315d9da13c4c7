//! ACL end to end: users, AUTH, the permission check on every path (plain commands, keys
//! spread over shards, MULTI, scripts, Pub/Sub), ACL LOG, the ACL file and the configuration's
//! `user` lines, and the connections a change closes; on 1 and 2 shards, plus the same
//! ACL script against `redis-server` (the oracle) reply for reply.

mod common;
mod diff;

use std::time::Duration;

use common::{eventually, Reply, Resp, Server, TempDir};

fn err(text: &str) -> Reply {
    Reply::Error(text.into())
}

fn int(n: i64) -> Reply {
    Reply::Int(n)
}

/// The ACL LOG entry's field `name`, from its flat map.
fn field(entry: &Reply, name: &str) -> Reply {
    let Reply::Array(Some(items)) = entry else {
        panic!("not an entry: {entry:?}")
    };
    let at = items
        .iter()
        .position(|item| *item == Reply::bulk(name))
        .unwrap_or_else(|| panic!("no {name} in {entry:?}"));
    items[at + 1].clone()
}

fn newest_log_entry(conn: &mut Resp) -> Reply {
    match conn.call(&["ACL", "LOG", "1"]) {
        Reply::Array(Some(mut entries)) if !entries.is_empty() => entries.remove(0),
        other => panic!("no ACL LOG entry: {other:?}"),
    }
}

const NO_KEY: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";

fn permissions(shards: &str) {
    let server = Server::start(&["--shards", shards]);
    let mut admin = server.connect();
    assert_eq!(admin.call(&["ACL", "WHOAMI"]), Reply::bulk("default"));
    assert_eq!(
        admin.call(&[
            "ACL",
            "SETUSER",
            "app",
            "on",
            ">secret",
            "+@read",
            "+set",
            "~app:*",
            "%R~shared:*"
        ]),
        Reply::ok()
    );
    let mut app = server.connect();
    assert_eq!(
        app.call(&["AUTH", "app", "nope"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(app.call(&["AUTH", "app", "secret"]), Reply::ok());
    assert_eq!(
        app.call(&["ACL", "WHOAMI"]),
        err("NOPERM this user has no permissions to run the 'acl|whoami' command")
    );
    assert_eq!(app.call(&["SET", "app:1", "v"]), Reply::ok());
    assert_eq!(app.call(&["GET", "app:1"]), Reply::bulk("v"));
    assert_eq!(app.call(&["SET", "other", "v"]), err(NO_KEY));
    assert_eq!(app.call(&["GET", "shared:x"]), Reply::nil());
    assert_eq!(app.call(&["SET", "shared:x", "v"]), err(NO_KEY));
    assert_eq!(
        app.call(&["DEL", "app:1"]),
        err("NOPERM this user has no permissions to run the 'del' command")
    );
    // MGET spans the shards: refused before any part is routed.
    let keys: Vec<String> = (0..16).map(|i| format!("app:{i}")).collect();
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    assert!(matches!(app.call(&mget), Reply::Array(Some(_))));
    mget.push("forbidden");
    assert_eq!(app.call(&mget), err(NO_KEY));
    let entry = newest_log_entry(&mut admin);
    assert_eq!(field(&entry, "reason"), Reply::bulk("key"));
    assert_eq!(field(&entry, "object"), Reply::bulk("forbidden"));
    assert_eq!(field(&entry, "username"), Reply::bulk("app"));
    assert_eq!(field(&entry, "context"), Reply::bulk("toplevel"));

    // Selectors: either one allows.
    admin.call(&["ACL", "SETUSER", "app", "(+del ~tmp:*)"]);
    assert_eq!(app.call(&["DEL", "tmp:1"]), int(0));
    // The root selector refuses the command, the other the key: the key is reported.
    assert_eq!(app.call(&["DEL", "app:1"]), err(NO_KEY));
    // Subcommands and first arguments.
    admin.call(&["ACL", "SETUSER", "app", "+config|get", "+select|0"]);
    assert!(matches!(
        app.call(&["CONFIG", "GET", "maxmemory"]),
        Reply::Array(Some(_))
    ));
    assert_eq!(
        app.call(&["CONFIG", "SET", "maxmemory", "0"]),
        err("NOPERM this user has no permissions to run the 'config|set' command")
    );
    assert_eq!(app.call(&["SELECT", "0"]), Reply::ok());
    assert_eq!(
        app.call(&["SELECT", "1"]),
        err("NOPERM this user has no permissions to run the 'select' command")
    );

    // Repeated denials count in one entry.
    admin.call(&["ACL", "LOG", "RESET"]);
    for _ in 0..3 {
        app.call(&["INCR", "app:n"]);
    }
    let entry = newest_log_entry(&mut admin);
    assert_eq!(field(&entry, "count"), int(3));
    assert_eq!(field(&entry, "object"), Reply::bulk("incr"));

    assert_eq!(
        admin.call(&["ACL", "DRYRUN", "app", "SET", "zz", "1"]),
        Reply::bulk("This user has no permissions to access the 'zz' key")
    );
    assert_eq!(
        admin.call(&["ACL", "DRYRUN", "app", "GET", "app:1"]),
        Reply::ok()
    );
    assert_eq!(
        admin.call(&["ACL", "DRYRUN", "ghost", "GET", "x"]),
        err("ERR User 'ghost' not found")
    );
    assert_eq!(
        admin.call(&["ACL", "USERS"]),
        Reply::Array(Some(vec![Reply::bulk("app"), Reply::bulk("default")]))
    );
}

#[test]
fn permissions_on_one_shard() {
    permissions("1");
}

#[test]
fn permissions_on_two_shards() {
    permissions("2");
}

fn transactions_and_scripts(shards: &str) {
    let server = Server::start(&["--shards", shards]);
    let mut admin = server.connect();
    admin.call(&[
        "ACL", "SETUSER", "t", "on", "nopass", "+multi", "+exec", "+incr", "+eval", "+get", "~k*",
    ]);
    let mut t = server.connect();
    assert_eq!(t.call(&["AUTH", "t", "x"]), Reply::ok());
    // A refusal at queue time aborts EXEC.
    assert_eq!(t.call(&["MULTI"]), Reply::ok());
    assert_eq!(t.call(&["INCR", "k1"]), Reply::Simple("QUEUED".into()));
    assert_eq!(
        t.call(&["SET", "k1", "1"]),
        err("NOPERM this user has no permissions to run the 'set' command")
    );
    assert_eq!(
        t.call(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    let entry = newest_log_entry(&mut admin);
    assert_eq!(field(&entry, "context"), Reply::bulk("multi"));
    // Rules changed between queueing and EXEC.
    assert_eq!(t.call(&["MULTI"]), Reply::ok());
    assert_eq!(t.call(&["INCR", "k1"]), Reply::Simple("QUEUED".into()));
    admin.call(&["ACL", "SETUSER", "t", "-incr"]);
    assert_eq!(
        t.call(&["EXEC"]),
        Reply::Array(Some(vec![err(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and \
             the EXEC call. This command is no longer allowed for the following reason: no \
             permission to execute the command or subcommand"
        )]))
    );
    // A script's commands are checked against its caller's user.
    admin.call(&["ACL", "SETUSER", "t", "+incr"]);
    assert_eq!(
        t.call(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "k2"]),
        int(1)
    );
    let Reply::Error(text) = t.call(&["EVAL", "return redis.call('incr', 'other')", "0"]) else {
        panic!("the script ran")
    };
    assert!(
        text.starts_with(
            "ERR The user executing the script can't access at least one of the keys mentioned \
             in the command arguments"
        ),
        "{text}"
    );
    let entry = newest_log_entry(&mut admin);
    assert_eq!(field(&entry, "context"), Reply::bulk("lua"));
    assert_eq!(field(&entry, "object"), Reply::bulk("other"));
    assert_eq!(t.call(&["EVAL", "return 1", "1", "elsewhere"]), err(NO_KEY));
}

#[test]
fn transactions_and_scripts_on_one_shard() {
    transactions_and_scripts("1");
}

#[test]
fn transactions_and_scripts_on_two_shards() {
    transactions_and_scripts("2");
}

fn client_list(admin: &mut Resp) -> String {
    match admin.call(&["CLIENT", "LIST"]) {
        Reply::Bulk(Some(text)) => String::from_utf8_lossy(&text).into_owned(),
        other => panic!("CLIENT LIST: {other:?}"),
    }
}

fn channels_and_disconnects(shards: &str) {
    let server = Server::start(&["--shards", shards]);
    let mut admin = server.connect();
    admin.call(&[
        "ACL",
        "SETUSER",
        "ps",
        "on",
        ">p",
        "+@pubsub",
        "+client",
        "resetchannels",
        "&news:*",
        "&orders",
    ]);
    let mut sub = server.connect();
    sub.call(&["AUTH", "ps", "p"]);
    sub.call(&["CLIENT", "SETNAME", "subscriber"]);
    assert_eq!(
        sub.call(&["SUBSCRIBE", "sports"]),
        err("NOPERM this user has no permissions to access one of the channels used as arguments")
    );
    assert_eq!(
        sub.call(&["PSUBSCRIBE", "news:x*"]),
        err("NOPERM this user has no permissions to access one of the channels used as arguments")
    );
    let mut publisher = server.connect();
    publisher.call(&["AUTH", "ps", "p"]);
    assert_eq!(
        publisher.call(&["PUBLISH", "sports", "m"]),
        err("NOPERM this user has no permissions to access one of the channels used as arguments")
    );
    assert!(matches!(
        sub.call(&["SUBSCRIBE", "news:1"]),
        Reply::Array(Some(_))
    ));
    assert!(matches!(
        sub.call(&["SSUBSCRIBE", "orders"]),
        Reply::Array(Some(_))
    ));
    // Wider rules keep it.
    admin.call(&["ACL", "SETUSER", "ps", "&more"]);
    assert!(client_list(&mut admin).contains("name=subscriber"));
    // Revoked channels close it at once, idle as it is.
    admin.call(&["ACL", "SETUSER", "ps", "resetchannels", "&orders"]);
    assert!(!client_list(&mut admin).contains("name=subscriber"));
    assert!(sub.is_closed_by_server());
    // Deleting the user closes its connections; the reply comes first.
    let mut own = server.connect();
    admin.call(&["ACL", "SETUSER", "self", "on", "nopass", "+acl", "+ping"]);
    own.call(&["AUTH", "self", "x"]);
    assert_eq!(own.call(&["ACL", "DELUSER", "self", "ps", "ghost"]), int(2));
    assert!(own.is_closed_by_server());
    assert!(publisher.is_closed_by_server());
    assert_eq!(
        admin.call(&["ACL", "DELUSER", "default"]),
        err("ERR The 'default' user cannot be removed")
    );
    assert_eq!(admin.call(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn channels_and_disconnects_on_one_shard() {
    channels_and_disconnects("1");
}

#[test]
fn channels_and_disconnects_on_two_shards() {
    channels_and_disconnects("2");
}

#[test]
fn requirepass_is_the_default_users_password() {
    let server = Server::start(&["--shards", "2", "--requirepass", "pw"]);
    let mut conn = server.connect();
    assert_eq!(
        conn.call(&["GET", "a"]),
        err("NOAUTH Authentication required.")
    );
    assert_eq!(conn.call(&["AUTH", "default", "pw"]), Reply::ok());
    assert!(matches!(
        conn.call(&["ACL", "GETUSER", "default"]),
        Reply::Array(Some(_))
    ));
    assert_eq!(
        conn.call(&["CONFIG", "SET", "requirepass", ""]),
        Reply::ok()
    );
    assert_eq!(
        conn.call(&["AUTH", "x"]),
        err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
    );
    let mut fresh = server.connect();
    assert_eq!(fresh.call(&["GET", "a"]), Reply::nil());
    // The default user switched off: new connections are not authenticated.
    conn.call(&["ACL", "SETUSER", "default", "off"]);
    let mut late = server.connect();
    assert_eq!(
        late.call(&["GET", "a"]),
        err("NOAUTH Authentication required.")
    );
    conn.call(&["ACL", "SETUSER", "default", "on"]);
}

#[test]
fn acl_file_load_and_save() {
    let dir = TempDir::new("acl-file");
    let file = dir.path().join("users.acl");
    std::fs::write(
        &file,
        "user alice on >alice ~* &* +@all\nuser bob on nopass -@all +get ~b*\n",
    )
    .unwrap();
    let server = Server::start(&[
        "--shards",
        "2",
        "--dir",
        dir.arg(),
        "--aclfile",
        "users.acl",
    ]);
    let mut conn = server.connect();
    assert_eq!(conn.call(&["AUTH", "alice", "alice"]), Reply::ok());
    let mut bob = server.connect();
    bob.call(&["AUTH", "bob", "x"]);
    assert_eq!(bob.call(&["GET", "b1"]), Reply::nil());
    assert_eq!(
        conn.call(&["ACL", "SETUSER", "eve", "on", ">eve", "+get", "allkeys"]),
        Reply::ok()
    );
    assert_eq!(conn.call(&["ACL", "SAVE"]), Reply::ok());
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.contains("user eve on #"), "{saved}");
    assert!(
        saved.contains("user default on nopass ~* &* +@all"),
        "{saved}"
    );
    // A broken file changes nothing.
    std::fs::write(&file, format!("{saved}user alice on nopass\n")).unwrap();
    let Reply::Error(text) = conn.call(&["ACL", "LOAD"]) else {
        panic!("loaded a file with a duplicate user")
    };
    assert!(text.contains("Duplicate user 'alice' found"), "{text}");
    std::fs::write(&file, &saved).unwrap();
    // LOAD makes the users anew: their connections close (the default user's stay).
    let mut plain = server.connect();
    assert_eq!(conn.call(&["ACL", "LOAD"]), Reply::ok());
    assert!(conn.is_closed_by_server());
    assert!(eventually(Duration::from_secs(5), || bob.is_closed_by_server()));
    assert_eq!(plain.call(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(plain.call(&["AUTH", "eve", "eve"]), Reply::ok());
    assert_eq!(
        plain.call(&["SET", "k", "v"]),
        err("NOPERM this user has no permissions to run the 'set' command")
    );
}

#[test]
fn configuration_users_and_a_missing_acl_file() {
    let dir = TempDir::new("acl-conf");
    let conf = dir.path().join("kv.conf");
    std::fs::write(
        &conf,
        "user default on nopass ~* +@all -flushdb\nuser ro on >ro ~* +@read\n",
    )
    .unwrap();
    let server = Server::try_start_with_config(&conf, &["--shards", "2"]).unwrap();
    let mut conn = server.connect();
    assert_eq!(
        conn.call(&["FLUSHDB"]),
        err("NOPERM this user has no permissions to run the 'flushdb' command")
    );
    assert_eq!(
        conn.call(&["SUBSCRIBE", "c"]),
        err("NOPERM this user has no permissions to access one of the channels used as arguments")
    );
    assert_eq!(conn.call(&["AUTH", "ro", "ro"]), Reply::ok());
    assert_eq!(conn.call(&["GET", "x"]), Reply::nil());
    let Reply::Error(text) = conn.call(&["ACL", "LOAD"]) else {
        panic!("ACL LOAD without a file")
    };
    assert!(text.starts_with("NOPERM"), "{text}");
    let mut fresh = server.connect();
    fresh.call(&["ACL", "SETUSER", "default", "+acl"]);
    let Reply::Error(text) = fresh.call(&["ACL", "LOAD"]) else {
        panic!("ACL LOAD without a file")
    };
    assert!(text.contains("not configured to use an ACL file"), "{text}");
}

/// The same ACL script on redis-server and corewire-kv (2 shards): every reply identical.
#[test]
fn acl_commands_match_redis_server() {
    let (oracle, server) = diff::servers(2, &[]);
    let mut pair = diff::Pair::new(&oracle, &server, "acl");
    for line in [
        "ACL SETUSER u1 on >p1 +get ~a* %R~b* %W~c* &ch",
        "ACL SETUSER u1 (+set ~x) (~y +@hash)",
        "ACL GETUSER u1",
        "ACL SETUSER u2 reset +@all -@dangerous +client|id",
        "ACL SETUSER u3 -@all +@read",
        "ACL SETUSER u4 +@all -client|kill",
        "ACL SETUSER u5 +memory|doctor",
        "ACL SETUSER u5 +memory",
        "ACL SETUSER u6 -@all +select|0",
        "ACL SETUSER u8 -@all +debug|object +debug|digest",
        "ACL SETUSER u7 %R~foo %W~foo %RW~bar",
        "ACL LIST",
        "ACL GETUSER u6",
        "ACL GETUSER nobody",
        "ACL SETUSER bad +config|get|x",
        "ACL SETUSER bad +config|asdf",
        "ACL SETUSER bad #abc",
        "ACL SETUSER bad allkeys ~x",
        "ACL SETUSER bad allchannels &x",
        "ACL SETUSER bad (this-is-invalid)",
        "ACL SETUSER bad ( +get",
        "ACL SETUSER bad <nosuch",
        "ACL SETUSER bad %X~a",
        "ACL GETUSER bad",
        "ACL DRYRUN u1 GET a1",
        "ACL DRYRUN u1 GET zz",
        "ACL DRYRUN u1 SET x 1",
        "ACL DRYRUN u1 SET c1 1",
        "ACL DRYRUN u1 HSET y f v",
        "ACL DRYRUN u1 PUBLISH other m",
        "ACL DRYRUN u1 PUBLISH ch m",
        "ACL DRYRUN u1 SET a",
        "ACL DRYRUN u1 NOSUCH a",
        "ACL DRYRUN u3 EVAL_RO x 0",
        "ACL CAT nosuch",
        "ACL CAT a b",
        "ACL GENPASS 0",
        "ACL GENPASS 5000",
        "ACL DELUSER u1 u2 nobody",
        "ACL USERS",
        "ACL LOAD",
        "ACL SAVE",
        "AUTH u3 wrong",
        "ACL SETUSER u3 on nopass",
        "AUTH u3 x",
        "SET k v",
        "GET k",
        "ACL WHOAMI",
        "AUTH default x",
        "ACL LOG RESET",
    ] {
        pair.check_str(&line.split(' ').collect::<Vec<_>>());
    }
    pair.check(&diff::args(&["ACL", "CAT"]), diff::Cmp::Unordered);
    pair.check(&diff::args(&["ACL", "CAT", "geo"]), diff::Cmp::Unordered);
    pair.report();
}
