use std::sync::Arc;

use bytes::Bytes;

use super::*;

fn session(config: SessionConfig) -> Session {
    Session::new(Arc::new(config))
}

fn output(session: &mut Session) -> String {
    session
        .take_output()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn requests(session: &mut Session) -> Vec<Request> {
    std::iter::from_fn(|| session.next_request()).collect()
}

fn get(key: &str) -> Command {
    Command::Get(Bytes::from(key.to_owned()))
}

#[test]
fn replies_leave_in_request_order() {
    let mut s = session(SessionConfig::default());
    s.feed(b"GET a\r\nPING\r\nGET b\r\nECHO hi\r\n");
    let reqs = requests(&mut s);
    assert_eq!(
        reqs,
        vec![
            Request {
                seq: 0,
                command: get("a")
            },
            Request {
                seq: 2,
                command: get("b")
            },
        ]
    );
    // PING is answered already but must wait behind GET a.
    assert_eq!(s.take_output(), None);
    assert_eq!(s.backlog(), 4);
    s.complete(2, Reply::Bulk(Bytes::from("B"))).unwrap();
    assert_eq!(s.take_output(), None);
    s.complete(0, Reply::NullBulk).unwrap();
    assert_eq!(output(&mut s), "$-1\r\n+PONG\r\n$1\r\nB\r\n$2\r\nhi\r\n");
    assert_eq!(s.backlog(), 0);
}

#[test]
fn input_may_arrive_in_pieces() {
    let mut s = session(SessionConfig::default());
    let request = b"*2\r\n$3\r\nGET\r\n$5\r\nhello\r\n";
    for chunk in request.chunks(3) {
        assert_eq!(s.next_request(), None);
        s.feed(chunk);
    }
    assert_eq!(
        s.next_request(),
        Some(Request {
            seq: 0,
            command: get("hello")
        })
    );
}

#[test]
fn may_have_request_only_with_input_left() {
    // The glue reads its clocks only when this says a request may come.
    let mut s = session(SessionConfig::default());
    assert!(!s.may_have_request());
    s.feed(b"GET a\r\nGE");
    assert!(s.may_have_request());
    assert_eq!(requests(&mut s).len(), 1);
    s.feed(b"T b\r\n");
    assert_eq!(requests(&mut s).len(), 1);
    assert!(!s.may_have_request());
}

#[test]
fn backlog_limit_pauses_parsing() {
    let mut s = session(SessionConfig {
        max_backlog: 2,
        ..SessionConfig::default()
    });
    s.feed(b"GET a\r\nGET b\r\nGET c\r\nPING\r\n");
    assert_eq!(requests(&mut s).len(), 2);
    assert!(!s.wants_read());
    assert_eq!(s.next_request(), None);
    s.complete(1, Reply::NullBulk).unwrap();
    // Answered but still queued behind request 0: the backlog is unchanged.
    assert!(!s.wants_read());
    s.complete(0, Reply::NullBulk).unwrap();
    // Room again, but two requests are still buffered: they are parsed before more is read.
    assert!(!s.wants_read());
    assert_eq!(
        s.next_request(),
        Some(Request {
            seq: 2,
            command: get("c")
        })
    );
    // PING fits in the backlog but is answered in place.
    assert_eq!(s.next_request(), None);
    assert_eq!(s.backlog(), 2);
    assert!(!s.wants_read());
    s.complete(2, Reply::NullBulk).unwrap();
    assert!(s.wants_read());
    assert_eq!(output(&mut s), "$-1\r\n$-1\r\n$-1\r\n+PONG\r\n");
}

#[test]
fn unread_output_pauses_parsing() {
    let mut s = session(SessionConfig {
        max_pending_output: 10,
        ..SessionConfig::default()
    });
    s.feed(b"ECHO 0123456789\r\nPING\r\n");
    assert_eq!(s.next_request(), None);
    assert!(!s.wants_read());
    assert_eq!(output(&mut s), "$10\r\n0123456789\r\n");
    // The output has room, but PING is still buffered: parsed before more is read.
    assert!(!s.wants_read());
    assert_eq!(s.next_request(), None);
    assert!(s.wants_read());
    assert_eq!(output(&mut s), "+PONG\r\n");
}

#[test]
fn quit_replies_then_closes() {
    let mut s = session(SessionConfig::default());
    s.feed(b"GET a\r\nQUIT\r\nGET b\r\n");
    assert_eq!(requests(&mut s).len(), 1);
    assert!(!s.wants_read());
    assert!(!s.is_closed());
    s.complete(0, Reply::NullBulk).unwrap();
    assert!(s.is_closed());
    assert_eq!(output(&mut s), "$-1\r\n+OK\r\n");
}

#[test]
fn protocol_error_replies_after_earlier_requests_then_closes() {
    let mut s = session(SessionConfig::default());
    s.feed(b"GET a\r\n*1\r\n$x\r\nGET b\r\n");
    assert_eq!(requests(&mut s).len(), 1);
    assert!(!s.wants_read());
    s.complete(0, Reply::NullBulk).unwrap();
    assert!(s.is_closed());
    assert_eq!(
        output(&mut s),
        "$-1\r\n-ERR Protocol error: invalid bulk length\r\n"
    );
    assert_eq!(s.next_request(), None);
    // Handed to the glue once, to be counted and logged (rate-limited).
    assert_eq!(
        s.take_protocol_error().as_deref(),
        Some("Protocol error: invalid bulk length")
    );
    assert_eq!(s.take_protocol_error(), None);
}

#[test]
fn command_errors_are_answered_locally() {
    let mut s = session(SessionConfig::default());
    s.feed(b"foo bar\r\nGET\r\nSET k v EX 0\r\nSELECT 1\r\nSELECT 0\r\n");
    assert_eq!(requests(&mut s), vec![]);
    assert_eq!(
        output(&mut s),
        "-ERR unknown command 'foo', with args beginning with: 'bar' \r\n\
         -ERR wrong number of arguments for 'get' command\r\n\
         -ERR invalid expire time in 'set' command\r\n\
         -ERR SELECT is not allowed in cluster mode\r\n\
         +OK\r\n"
    );
}

#[test]
fn requirepass_gates_commands() {
    let mut s = session(SessionConfig::default().with_requirepass("secret"));
    s.feed(
        b"GET k\r\nPING\r\nnope\r\nGET\r\nSET k v bogus\r\nAUTH a b c\r\nAUTH wrong\r\n\
          AUTH bob secret\r\nAUTH secret\r\nGET k\r\n",
    );
    assert!(!s.is_authenticated());
    let reqs = requests(&mut s);
    assert!(s.is_authenticated());
    assert_eq!(
        reqs,
        vec![Request {
            seq: 9,
            command: get("k")
        }]
    );
    s.complete(9, Reply::NullBulk).unwrap();
    assert_eq!(
        output(&mut s),
        "-NOAUTH Authentication required.\r\n\
         -NOAUTH Authentication required.\r\n\
         -ERR unknown command 'nope', with args beginning with: \r\n\
         -ERR wrong number of arguments for 'get' command\r\n\
         -NOAUTH Authentication required.\r\n\
         -ERR syntax error\r\n\
         -WRONGPASS invalid username-password pair or user is disabled.\r\n\
         -WRONGPASS invalid username-password pair or user is disabled.\r\n\
         +OK\r\n\
         $-1\r\n"
    );
}

#[test]
fn auth_without_requirepass() {
    let mut s = session(SessionConfig::default());
    s.feed(b"AUTH pw\r\nAUTH default anything\r\nAUTH bob pw\r\n");
    requests(&mut s);
    assert_eq!(
        output(&mut s),
        "-ERR AUTH <password> called without any password configured for the default user. \
         Are you sure your configuration is correct?\r\n\
         +OK\r\n\
         -WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
}

#[test]
fn config_get_answers_benchmark_start_up() {
    let mut config = SessionConfig::default();
    config.set_parameter("appendonly", "yes");
    let mut s = session(config);
    s.feed(b"CONFIG GET save\r\nconfig get APPENDONLY\r\nCONFIG GET appendf* nomatch\r\n");
    requests(&mut s);
    assert_eq!(
        output(&mut s),
        "*2\r\n$4\r\nsave\r\n$0\r\n\r\n\
         *2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n\
         *4\r\n$14\r\nappendfilename\r\n$14\r\nappendonly.aof\r\n\
         $11\r\nappendfsync\r\n$8\r\neverysec\r\n"
    );
}

#[test]
fn command_introspection() {
    let mut s = session(SessionConfig::default());
    s.feed(b"COMMAND COUNT\r\nCOMMAND INFO get nope\r\n");
    requests(&mut s);
    let text = output(&mut s);
    let count = crate::command::table::all().count();
    assert!(count > 100, "{count}");
    let text = text.replacen(&format!(":{count}\r\n"), ":N\r\n", 1);
    // Redis 7.0's reply, byte for byte.
    assert_eq!(
        text,
        ":N\r\n*2\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n\
         *3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n\
         $12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n\
         $9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n\
         $7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n$-1\r\n"
    );
    s.feed(b"COMMAND DOCS\r\n");
    requests(&mut s);
    assert!(output(&mut s).starts_with(&format!("*{}\r\n", 2 * count)));
    s.feed(b"COMMAND\r\n");
    requests(&mut s);
    assert!(output(&mut s).starts_with(&format!("*{count}\r\n")));
}

#[test]
fn completing_unknown_or_answered_requests_is_an_error() {
    let mut s = session(SessionConfig::default());
    s.feed(b"GET a\r\n");
    requests(&mut s);
    assert_eq!(
        s.complete(5, Reply::NullBulk),
        Err(SessionError::UnknownSequence(5))
    );
    s.complete(0, Reply::NullBulk).unwrap();
    assert_eq!(
        s.complete(0, Reply::NullBulk),
        Err(SessionError::UnknownSequence(0))
    );
    s.feed(b"GET a\r\nGET b\r\n");
    requests(&mut s);
    s.complete(2, Reply::NullBulk).unwrap();
    assert_eq!(
        s.complete(2, Reply::NullBulk),
        Err(SessionError::AlreadyAnswered(2))
    );
}

#[test]
fn client_setname_getname_and_setinfo() {
    let mut s = session(SessionConfig::default());
    s.feed(b"CLIENT GETNAME\r\nCLIENT SETNAME worker-1\r\nclient getname\r\n");
    s.feed(
        b"CLIENT SETNAME \"a b\"\r\nCLIENT GETNAME\r\nCLIENT SETNAME \"\"\r\nCLIENT GETNAME\r\n",
    );
    s.feed(b"CLIENT SETINFO lib-name redis-py\r\nCLIENT SETINFO LIB-VER 5.0\r\n");
    s.feed(b"CLIENT SETINFO lib-os linux\r\nCLIENT SETINFO lib-ver \"1 2\"\r\n");
    s.feed(b"CLIENT NOPE\r\nCLIENT SETNAME\r\n");
    assert!(requests(&mut s).is_empty());
    assert_eq!(
        output(&mut s),
        "$-1\r\n+OK\r\n$8\r\nworker-1\r\n\
         -ERR Client names cannot contain spaces, newlines or special characters.\r\n\
         $8\r\nworker-1\r\n+OK\r\n$-1\r\n\
         +OK\r\n+OK\r\n\
         -ERR Unrecognized option 'lib-os'\r\n\
         -ERR lib-ver cannot contain spaces, newlines or special characters.\r\n\
         -ERR unknown subcommand 'NOPE'. Try CLIENT HELP.\r\n\
         -ERR wrong number of arguments for 'client|setname' command\r\n"
    );
}

#[test]
fn client_ids_are_distinct_and_increasing() {
    let mut first = session(SessionConfig::default());
    let mut second = session(SessionConfig::default());
    let id = |s: &mut Session| {
        s.feed(b"CLIENT ID\r\nclient id\r\n");
        assert!(requests(s).is_empty());
        let text = output(s);
        let (a, b) = text.split_once("\r\n").expect("two replies");
        assert_eq!(b, format!("{a}\r\n"), "stable per connection");
        a.strip_prefix(':')
            .expect("integer")
            .parse::<u64>()
            .expect("id")
    };
    let (a, b) = (id(&mut first), id(&mut second));
    assert!(a >= 1 && b > a, "{a} {b}");
}

#[test]
fn reset_forgets_name_and_authentication_keeps_id() {
    let mut s = session(SessionConfig::default().with_requirepass("secret"));
    s.feed(b"RESET\r\nAUTH secret\r\nCLIENT ID\r\nCLIENT SETNAME w\r\nRESET\r\n");
    assert!(requests(&mut s).is_empty());
    assert!(!s.is_authenticated());
    let before = output(&mut s);
    s.feed(b"CLIENT GETNAME\r\nAUTH secret\r\nCLIENT GETNAME\r\nCLIENT ID\r\nRESET x\r\n");
    assert!(requests(&mut s).is_empty());
    let after = output(&mut s);
    let id = before
        .strip_prefix("+RESET\r\n+OK\r\n")
        .and_then(|rest| rest.strip_suffix("+OK\r\n+RESET\r\n"))
        .expect(&before);
    assert!(id.starts_with(':'), "{before}");
    assert_eq!(
        after,
        format!(
            "-NOAUTH Authentication required.\r\n+OK\r\n$-1\r\n{id}\
             -ERR wrong number of arguments for 'reset' command\r\n"
        )
    );
}

#[test]
fn reset_without_requirepass_stays_authenticated() {
    let mut s = session(SessionConfig::default());
    s.feed(b"CLIENT SETNAME w\r\nreset\r\nCLIENT GETNAME\r\nGET k\r\n");
    assert_eq!(requests(&mut s).len(), 1);
    assert!(s.is_authenticated());
    assert_eq!(output(&mut s), "+OK\r\n+RESET\r\n$-1\r\n");
}

#[test]
fn multi_queues_and_exec_submits_the_transaction() {
    let mut s = session(SessionConfig::default());
    s.feed(b"MULTI\r\nSET a 1\r\nPING\r\nSET a 1 EX x\r\nEXEC\r\nGET a\r\n");
    let reqs = requests(&mut s);
    // Only EXEC goes to the shards, and nothing after it until it is answered.
    assert_eq!(reqs.len(), 1);
    let Command::Transaction(txn) = &reqs[0].command else {
        panic!("EXEC submits a transaction: {:?}", reqs[0]);
    };
    assert_eq!(txn.items.len(), 3);
    assert!(matches!(
        &txn.items[0],
        crate::command::TxnItem::Run(Command::Set(_))
    ));
    assert_eq!(
        txn.items[1],
        crate::command::TxnItem::Answered(Reply::simple("PONG"))
    );
    assert!(matches!(
        &txn.items[2],
        crate::command::TxnItem::Answered(Reply::Error(_))
    ));
    assert_eq!(output(&mut s), "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n");
    s.complete(reqs[0].seq, Reply::Array(vec![Reply::ok()]))
        .unwrap();
    assert_eq!(
        requests(&mut s),
        vec![Request {
            seq: 5,
            command: get("a")
        }]
    );
}

#[test]
fn queue_time_errors_abort_exec_and_watches_are_dropped() {
    let mut s = session(SessionConfig::default());
    s.feed(b"WATCH k\r\nMULTI\r\nNOSUCH\r\nGET\r\nEXEC\r\nUNWATCH\r\n");
    let reqs = requests(&mut s);
    // WATCH, then the UNWATCH that EXECABORT implies; the client's UNWATCH is answered here.
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].command, Command::Watch(vec![Bytes::from("k")]));
    assert_eq!(reqs[1].command, Command::Unwatch);
    s.complete(reqs[0].seq, Reply::ok()).unwrap();
    s.complete(reqs[1].seq, Reply::ok()).unwrap();
    let out = output(&mut s);
    assert!(
        out.ends_with("-EXECABORT Transaction discarded because of previous errors.\r\n+OK\r\n"),
        "{out}"
    );
}

#[test]
fn subscriptions_confirm_each_name_and_limit_the_commands() {
    let mut s = session(SessionConfig::default());
    s.feed(b"SUBSCRIBE a b\r\nGET x\r\nPING\r\nUNSUBSCRIBE\r\nGET x\r\n");
    let reqs = requests(&mut s);
    assert_eq!(
        reqs,
        vec![Request {
            seq: 6,
            command: get("x")
        }]
    );
    assert_eq!(
        s.take_pubsub_changes(),
        vec![
            SubChange::Subscribe(Bytes::from("a")),
            SubChange::Subscribe(Bytes::from("b")),
            SubChange::Unsubscribe(Bytes::from("a")),
            SubChange::Unsubscribe(Bytes::from("b")),
        ]
    );
    assert_eq!(
        output(&mut s),
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n\
         -ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n\
         *2\r\n$4\r\npong\r\n$0\r\n\r\n\
         *3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n"
    );
}

#[test]
fn a_subscriber_past_its_hard_limit_is_killed() {
    let config = SessionConfig::default();
    config.live.set_pubsub_output_limit(OutputLimit {
        hard: 100,
        soft: 50,
        soft_ms: 1_000,
    });
    let mut s = session(config.clone());
    let message = Reply::Bulk(Bytes::from(vec![b'x'; 40]));
    assert!(s.push_message(message.clone(), 0));
    assert!(s.push_message(message.clone(), 0));
    assert!(!s.push_message(message.clone(), 0), "past 100 bytes");
    assert!(s.is_killed() && s.is_closed() && s.pending_output() == 0);
    // Above the soft limit for longer than its time.
    let mut s = session(config);
    assert!(s.push_message(message.clone(), 0));
    assert!(s.push_message(Reply::Integer(1), 10));
    assert!(s.take_output().is_some(), "reading brings it under");
    assert!(s.push_message(message.clone(), 2_000));
    assert!(s.push_message(Reply::Integer(1), 2_500));
    assert!(
        s.push_message(Reply::Integer(1), 3_400),
        "above soft for 900 ms"
    );
    assert!(
        !s.push_message(Reply::Integer(1), 3_600),
        "above soft for 1100 ms"
    );
}

fn broadcast(request: &Request) -> &crate::command::ClientsBroadcast {
    match &request.command {
        Command::Client(crate::command::ClientRequest::Broadcast(broadcast)) => broadcast,
        other => panic!("not a CLIENT broadcast: {other:?}"),
    }
}

#[test]
fn client_list_carries_the_callers_own_line() {
    use crate::command::ClientsOp;
    let mut s = session(SessionConfig::default());
    let peer = "10.0.0.7:51000".parse().ok();
    let local = "10.0.0.1:6379".parse().ok();
    s.set_peer(peer, local, 12, 1_000);
    s.feed(b"CLIENT SETNAME me\r\nBLPOP k 0\r\n");
    let blpop = requests(&mut s);
    assert!(blpop[0].command.is_blocking());
    s.touch(5_000);
    s.feed(b"CLIENT LIST\r\nCLIENT LIST TYPE pubsub\r\n");
    let lists = requests(&mut s);
    let ClientsOp::List { caller_line, .. } = &broadcast(&lists[0]).op else {
        panic!("LIST");
    };
    let (id, line) = caller_line.as_ref().expect("the caller is listed");
    assert_eq!(*id, s.client_id());
    let line = String::from_utf8_lossy(line);
    assert!(
        line.contains("addr=10.0.0.7:51000 laddr=10.0.0.1:6379 fd=12 name=me age=4 idle=0 flags=b"),
        "{line}"
    );
    assert!(line.contains(" cmd=client|list "), "{line}");
    let ClientsOp::List { caller_line, .. } = &broadcast(&lists[1]).op else {
        panic!("LIST");
    };
    assert_eq!(
        *caller_line, None,
        "TYPE pubsub does not pick a normal client"
    );
    // The pop answered, the flag goes.
    s.complete(blpop[0].seq, Reply::NullArray).unwrap();
    assert!(!s.client_line(5_000).unwrap().flags.blocked);
}

#[test]
fn client_kill_of_itself_closes_after_the_reply() {
    use crate::command::ClientsOp;
    let mut s = session(SessionConfig::default());
    let id = s.client_id();
    s.feed(format!("CLIENT KILL ID {id}\r\nCLIENT KILL ID {id} SKIPME no\r\nPING\r\n").as_bytes());
    let kills = requests(&mut s);
    assert_eq!(
        kills.len(),
        2,
        "nothing is parsed after the KILL that picks the caller"
    );
    let killed = |request: &Request| match &broadcast(request).op {
        ClientsOp::Kill { caller_killed, .. } => *caller_killed,
        _ => panic!("KILL"),
    };
    assert!(!killed(&kills[0]), "SKIPME yes spares the caller");
    assert!(killed(&kills[1]));
    s.complete(kills[0].seq, Reply::Integer(0)).unwrap();
    s.complete(kills[1].seq, Reply::Integer(1)).unwrap();
    assert_eq!(output(&mut s), ":0\r\n:1\r\n");
    assert!(s.is_closed());
}

#[test]
fn a_killed_session_closes_and_leaves_the_listing() {
    let mut s = session(SessionConfig::default());
    s.feed(b"CLIENT INFO\r\n");
    assert!(requests(&mut s).is_empty(), "CLIENT INFO is answered here");
    assert!(output(&mut s).contains(" cmd=client|info "));
    assert!(s.client_line(0).is_some());
    s.kill();
    assert!(s.is_killed() && s.is_closed());
    assert_eq!(s.client_line(0), None);
}

#[test]
fn no_multi_commands_are_refused_inside_multi_and_abort_exec() {
    let mut s = session(SessionConfig::default());
    s.feed(b"MULTI\r\nSET foo bar\r\nSHUTDOWN\r\nEXEC\r\n");
    assert!(requests(&mut s).is_empty(), "nothing runs");
    assert_eq!(
        output(&mut s),
        "+OK\r\n+QUEUED\r\n-ERR Command not allowed inside a transaction\r\n\
         -EXECABORT Transaction discarded because of previous errors.\r\n"
    );
}

#[test]
fn a_waiting_connection_keeps_its_buffers_until_a_sweep_finds_it_idle() {
    let mut s = session(SessionConfig::default());
    assert!(!s.wants_idle_sweep(), "a new session holds no buffers");
    s.feed(b"PING\r\n");
    assert!(requests(&mut s).is_empty());
    assert_eq!(output(&mut s), "+PONG\r\n");
    // The glue hands the answered calls to the shard before it waits.
    let mut names = Vec::new();
    s.record_calls_with(|calls| names.extend(calls.iter().map(|call| call.name)));
    assert_eq!(names, [Some("ping")]);
    s.record_calls_with(|_| panic!("the calls were handed over twice"));
    let held = s.memory();
    assert!(held > std::mem::size_of::<Session>());
    // Listed once, however often it waits.
    assert!(s.wants_idle_sweep());
    assert!(!s.wants_idle_sweep());
    // Input arrived since it was listed: kept for another interval.
    assert!(s.idle_sweep());
    assert_eq!(s.memory(), held);
    // An interval with no input: freed and unlisted.
    assert!(!s.idle_sweep());
    assert_eq!(s.memory(), std::mem::size_of::<Session>());
    assert!(!s.wants_idle_sweep(), "nothing left to free");
    // Busy again: listed again.
    s.feed(b"PING\r\n");
    assert!(requests(&mut s).is_empty());
    assert_eq!(output(&mut s), "+PONG\r\n");
    assert!(s.wants_idle_sweep());
}
