//! The session's ACL glue without sockets: AUTH against users, NOPERM before routing, MULTI's
//! EXECABORT, the log, and a connection whose user is deleted.

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::acl::User;

fn with_user(rules: &str) -> Arc<SessionConfig> {
    let config = Arc::new(SessionConfig::default());
    config
        .acl
        .update(|users| -> Result<(), crate::acl::RuleError> {
            let mut user = User::new(Bytes::from_static(b"u"), 99, false);
            for rule in rules.split(' ') {
                user.apply(rule.as_bytes(), false)?;
            }
            users.map.insert(user.name.clone(), Arc::new(user));
            Ok(())
        })
        .unwrap();
    config
}

fn output(session: &mut Session) -> String {
    session
        .take_output()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

#[test]
fn refusals_come_before_routing_and_abort_multi() {
    let config = with_user("on >pw +get +multi +exec ~a*");
    let mut s = Session::new(config.clone());
    s.feed(
        b"AUTH u nope\r\nAUTH u pw\r\nGET a1\r\nGET b\r\nSET a1 v\r\nMULTI\r\nSET a1 v\r\nEXEC\r\n",
    );
    let forwarded: Vec<Request> = std::iter::from_fn(|| s.next_request()).collect();
    assert_eq!(
        forwarded.len(),
        1,
        "only GET a1 reaches a shard: {forwarded:?}"
    );
    assert_eq!(
        forwarded[0].command,
        Command::Get(Bytes::from_static(b"a1"))
    );
    s.complete(forwarded[0].seq, Reply::NullBulk).unwrap();
    assert_eq!(
        output(&mut s),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n\
         +OK\r\n\
         $-1\r\n\
         -NOPERM this user has no permissions to access one of the keys used as arguments\r\n\
         -NOPERM this user has no permissions to run the 'set' command\r\n\
         +OK\r\n\
         -NOPERM this user has no permissions to run the 'set' command\r\n\
         -EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    // The failed AUTH, the key, and the two SETs (one entry each context).
    assert_eq!(config.acl.log().len(), 4);
}

#[test]
fn a_deleted_users_connection_closes_unanswered() {
    let config = with_user("on nopass +@all ~*");
    let mut s = Session::new(config.clone());
    s.feed(b"AUTH u x\r\n");
    assert!(s.next_request().is_none());
    assert_eq!(output(&mut s), "+OK\r\n");
    let _ = config.acl.update(|users| -> Result<(), ()> {
        users.map.remove(&b"u"[..]);
        Ok(())
    });
    s.feed(b"PING\r\n");
    assert!(s.next_request().is_none());
    assert!(s.is_closed());
    assert_eq!(output(&mut s), "");
}

#[test]
fn a_changed_user_is_followed_and_the_default_user_decides_new_connections() {
    let config = with_user("on nopass -@all +ping");
    let mut s = Session::new(config.clone());
    s.feed(b"AUTH u x\r\nPING\r\n");
    assert!(s.next_request().is_none());
    assert_eq!(output(&mut s), "+OK\r\n+PONG\r\n");
    let _ = config
        .acl
        .update(|users| -> Result<(), crate::acl::RuleError> {
            let mut user = User::clone(users.get(b"u").unwrap());
            user.apply(b"-ping", false)?;
            users.map.insert(user.name.clone(), Arc::new(user));
            Ok(())
        });
    s.feed(b"PING\r\n");
    assert!(s.next_request().is_none());
    assert_eq!(
        output(&mut s),
        "-NOPERM this user has no permissions to run the 'ping' command\r\n"
    );
    config.acl.set_requirepass(b"pw");
    assert!(!Session::new(config.clone()).is_authenticated());
    config.acl.set_requirepass(b"");
    assert!(Session::new(config).is_authenticated());
}

#[test]
fn the_remembered_last_command_decides_as_a_lookup_would() {
    // A pipeline of one command hits the thread's last command: other spellings, another
    // command, a wrong argument count and a container's subcommands must still be judged
    // as the table and the catalog would judge them.
    let config = with_user("on >pw -@all +get +config|get ~a*");
    let mut s = Session::new(config);
    s.feed(
        b"AUTH u pw\r\nGET a1\r\nGET a2\r\nget b\r\nGeT a3\r\nGET\r\nSET a1 v\r\nGET a4\r\n\
          CONFIG GET maxmemory\r\nCONFIG SET maxmemory 1\r\nCONFIG GET maxmemory\r\n",
    );
    let forwarded: Vec<Request> = std::iter::from_fn(|| s.next_request()).collect();
    let gets: Vec<&Command> = (forwarded.iter().map(|r| &r.command))
        .filter(|c| matches!(c, Command::Get(_)))
        .collect();
    assert_eq!(
        gets,
        [b"a1", b"a2", b"a3", b"a4"]
            .map(|k| Command::Get(Bytes::from_static(k)))
            .iter()
            .collect::<Vec<_>>()
    );
    for request in &forwarded {
        s.complete(request.seq, Reply::NullBulk).unwrap();
    }
    let out = output(&mut s);
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with('-')).collect();
    assert_eq!(
        errors,
        [
            "-NOPERM this user has no permissions to access one of the keys used as arguments",
            "-ERR wrong number of arguments for 'get' command",
            "-NOPERM this user has no permissions to run the 'set' command",
            "-NOPERM this user has no permissions to run the 'config|set' command",
        ],
        "{out}"
    );
}

/// One request through `s`: "ok" if it reached a shard (allowed), else its reply.
fn request(s: &mut Session, line: &str) -> String {
    s.feed(format!("{line}\r\n").as_bytes());
    let forwarded: Vec<Request> = std::iter::from_fn(|| s.next_request()).collect();
    for r in &forwarded {
        s.complete(r.seq, Reply::NullBulk).unwrap();
    }
    let out = output(s);
    if forwarded.is_empty() {
        out.trim_end().to_owned()
    } else {
        "ok".to_owned()
    }
}

/// Replaces user `name` with a copy given `rules` (what ACL SETUSER does).
fn set_user(config: &SessionConfig, name: &str, rules: &str) {
    config
        .acl
        .update(|users| -> Result<(), crate::acl::RuleError> {
            let mut user = match users.get(name.as_bytes()) {
                Some(user) => User::clone(user),
                None => User::new(Bytes::from(name.to_owned()), 1000, false),
            };
            for rule in crate::acl::user::merge_selector_args(
                &(rules.split(' ').map(|r| Bytes::from(r.to_owned()))).collect::<Vec<_>>(),
            )
            .unwrap()
            {
                user.apply(&rule, false)?;
            }
            users.map.insert(user.name.clone(), Arc::new(user));
            Ok(())
        })
        .unwrap();
}

const KEY_DENIED: &str =
    "-NOPERM this user has no permissions to access one of the keys used as arguments";

#[test]
fn remembered_verdicts_follow_every_change_of_the_rules() {
    // Two connections of one user on one thread share the thread's last command and the
    // user's verdicts: each change must reach both on their very next command.
    let config = with_user("on >pw -@all +get ~a*");
    let (mut s1, mut s2) = (Session::new(config.clone()), Session::new(config.clone()));
    assert_eq!(request(&mut s1, "AUTH u pw"), "+OK");
    assert_eq!(request(&mut s2, "AUTH u pw"), "+OK");
    assert_eq!(request(&mut s1, "GET a1"), "ok");
    assert_eq!(request(&mut s2, "GET a1"), "ok");
    // SETUSER on the user both use.
    set_user(&config, "u", "resetkeys ~b*");
    assert_eq!(request(&mut s2, "GET a1"), KEY_DENIED);
    assert_eq!(request(&mut s1, "GET a1"), KEY_DENIED);
    assert_eq!(request(&mut s1, "GET b1"), "ok");
    // A selector added.
    set_user(&config, "u", "(+get ~a*)");
    assert_eq!(request(&mut s1, "GET a1"), "ok");
    assert_eq!(request(&mut s2, "GET a1"), "ok");
    set_user(&config, "u", "-get");
    assert_eq!(request(&mut s2, "GET b1"), KEY_DENIED);
    // AUTH as another user, on one connection only.
    set_user(&config, "v", "on >pw +get ~c*");
    assert_eq!(request(&mut s1, "AUTH v pw"), "+OK");
    assert_eq!(request(&mut s1, "GET a1"), KEY_DENIED);
    assert_eq!(request(&mut s1, "GET c1"), "ok");
    assert_eq!(request(&mut s2, "GET a1"), "ok");
    assert_eq!(request(&mut s2, "GET c1"), KEY_DENIED);
    // RESET: the default user, unrestricted.
    assert_eq!(request(&mut s1, "RESET"), "+RESET");
    assert_eq!(request(&mut s1, "GET x"), "ok");
    // DELUSER: its connection closes unanswered; ACL LOAD makes users anew (another
    // identity): theirs close too.
    assert_eq!(request(&mut s1, "AUTH v pw"), "+OK");
    config
        .acl
        .update(|users| -> Result<(), ()> {
            users.map.remove(&b"v"[..]);
            let fresh = User::clone(users.get(b"u").unwrap());
            let mut anew = User::new(fresh.name.clone(), 2000, false);
            for rule in ["on", ">pw", "+get", "~a*"] {
                anew.apply(rule.as_bytes(), false).unwrap();
            }
            users.map.insert(anew.name.clone(), Arc::new(anew));
            Ok(())
        })
        .unwrap();
    assert_eq!(request(&mut s1, "GET c1"), "");
    assert!(s1.is_closed());
    assert_eq!(request(&mut s2, "GET a1"), "");
    assert!(s2.is_closed());
    // A new connection of the new user gets its verdicts.
    let mut s3 = Session::new(config);
    assert_eq!(request(&mut s3, "AUTH u pw"), "+OK");
    assert_eq!(request(&mut s3, "GET a1"), "ok");
    assert_eq!(request(&mut s3, "GET b1"), KEY_DENIED);
}

#[test]
fn the_remembered_arity_accepts_what_the_table_accepts() {
    // SET's arity is -3: fewer arguments are the table's error, more are SET's options.
    let config = with_user("on >pw -@all +set ~a*");
    let mut s = Session::new(config);
    assert_eq!(request(&mut s, "AUTH u pw"), "+OK");
    assert_eq!(request(&mut s, "SET a1 v"), "ok");
    assert_eq!(
        request(&mut s, "SET a1"),
        "-ERR wrong number of arguments for 'set' command"
    );
    assert_eq!(request(&mut s, "SET a1 v EX 10"), "ok");
    assert_eq!(request(&mut s, "SET b1 v EX 10"), KEY_DENIED);
    // With GET the key is read as well: still allowed by ~a*.
    assert_eq!(request(&mut s, "SET a1 v GET"), "ok");
    // The rare state's box AUTH needed is gone with the next request; held or not, it is
    // no request to parse.
    assert!(s.rare.is_none() && !s.may_have_request());
    s.rare();
    assert!(!s.may_have_request());
}
