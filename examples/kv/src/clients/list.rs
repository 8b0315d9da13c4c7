//! CLIENT LIST / INFO / KILL, sans-I/O: a connection's line as Redis 7.0 prints it
//! (`catClientInfoString`), the arguments of LIST and KILL with Redis's checks and wording,
//! and which connections they pick.

use std::fmt::Write as _;

use bytes::Bytes;

use crate::command::CommandError;
use crate::number::parse_i64;

/// What CLIENT LIST / INFO print about one connection. Fields this server does not track
/// (Redis's argument and reply-list memory, sharded Pub/Sub) are printed as 0.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientLine {
    pub id: u64,
    /// `ip:port` of the peer, and of our end of the connection.
    pub addr: String,
    pub laddr: String,
    pub fd: i64,
    pub name: Bytes,
    pub age_s: u64,
    pub idle_s: u64,
    pub flags: ClientFlags,
    pub sub: usize,
    pub psub: usize,
    pub ssub: usize,
    /// Commands queued since MULTI; -1 outside MULTI.
    pub multi: i64,
    /// Unparsed input, and the input buffer's free space.
    pub qbuf: usize,
    pub qbuf_free: usize,
    /// Output not yet written.
    pub omem: usize,
    /// The connection's buffers and fixed state.
    pub tot_mem: usize,
    /// Last command run (the command table's name, `client|list`); `None` before any.
    pub cmd: Option<&'static str>,
    /// 2 or 3 (HELLO).
    pub resp: u8,
    pub lib_name: Bytes,
    pub lib_ver: Bytes,
    /// CLIENT TRACKING's redirect: -1 when tracking is off, 0 for none.
    pub redir: i64,
    /// The ACL user (empty: `default`).
    pub user: Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientFlags {
    /// `P`: subscribed to a channel or pattern.
    pub pubsub: bool,
    /// `x`: between MULTI and EXEC.
    pub multi: bool,
    /// `b`: waiting in a blocking pop.
    pub blocked: bool,
    /// `e`: CLIENT NO-EVICT on.
    pub no_evict: bool,
    /// `O`: in MONITOR mode.
    pub monitor: bool,
    /// `t`, `R`, `B`: CLIENT TRACKING on, its redirect broken, in BCAST mode.
    pub tracking: bool,
    pub broken_redirect: bool,
    pub bcast: bool,
    /// `S`: a replica's link.
    pub replica: bool,
}

impl ClientFlags {
    /// Redis's letters, in its order; `N` for none.
    fn letters(self) -> String {
        let mut out = String::new();
        for (on, letter) in [
            (self.replica, 'S'),
            (self.monitor, 'O'),
            (self.pubsub, 'P'),
            (self.multi, 'x'),
            (self.blocked, 'b'),
            (self.tracking, 't'),
            (self.broken_redirect, 'R'),
            (self.bcast, 'B'),
            (self.no_evict, 'e'),
        ] {
            if on {
                out.push(letter);
            }
        }
        if out.is_empty() {
            out.push('N');
        }
        out
    }
}

impl ClientLine {
    pub fn kind(&self) -> ClientType {
        if self.flags.replica {
            ClientType::Replica
        } else if self.flags.pubsub {
            ClientType::PubSub
        } else {
            ClientType::Normal
        }
    }

    /// The line, without the trailing newline. Redis 7.0's fields in its order, then 7.2's
    /// `lib-name` and `lib-ver` (this server has CLIENT SETINFO).
    pub fn format(&self) -> String {
        let mut out = String::with_capacity(320);
        let _ = write!(
            out,
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db=0 sub={} psub={} \
             ssub={} multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs={} rbp={} obl=0 \
             oll=0 omem={} tot-mem={} events={} cmd={} user={} redir={} resp={} \
             lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            String::from_utf8_lossy(&self.name),
            self.age_s,
            self.idle_s,
            self.flags.letters(),
            self.sub,
            self.psub,
            self.ssub,
            self.multi,
            self.qbuf,
            self.qbuf_free,
            self.qbuf + self.qbuf_free,
            self.qbuf + self.qbuf_free,
            self.omem,
            self.tot_mem,
            if self.omem > 0 { "rw" } else { "r" },
            self.cmd.unwrap_or("NULL"),
            if self.user.is_empty() {
                "default".into()
            } else {
                String::from_utf8_lossy(&self.user)
            },
            self.redir,
            self.resp,
            String::from_utf8_lossy(&self.lib_name),
            String::from_utf8_lossy(&self.lib_ver),
        );
        out
    }
}

/// Redis's client types (`getClientTypeByName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientType {
    Normal,
    PubSub,
    Master,
    Replica,
}

impl ClientType {
    fn parse(name: &[u8]) -> Result<ClientType, CommandError> {
        let kind = match name.to_ascii_lowercase().as_slice() {
            b"normal" => ClientType::Normal,
            b"pubsub" => ClientType::PubSub,
            b"master" => ClientType::Master,
            b"replica" | b"slave" => ClientType::Replica,
            _ => {
                return Err(CommandError::Text(format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(name)
                )))
            }
        };
        Ok(kind)
    }
}

/// Which connections CLIENT LIST prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListQuery {
    All,
    Type(ClientType),
    /// CLIENT LIST ID id [id ...]: in the order asked, each time asked.
    Ids(Vec<i64>),
}

impl ListQuery {
    /// The arguments after `CLIENT LIST`, checked as Redis 7.0 does.
    pub fn parse(args: &[Bytes]) -> Result<ListQuery, CommandError> {
        match args {
            [] => Ok(ListQuery::All),
            [option, kind] if option.eq_ignore_ascii_case(b"type") => {
                ClientType::parse(kind).map(ListQuery::Type)
            }
            [option, ids @ ..] if !ids.is_empty() && option.eq_ignore_ascii_case(b"id") => ids
                .iter()
                .map(|id| {
                    parse_i64(id).ok_or_else(|| CommandError::Text("ERR Invalid client ID".into()))
                })
                .collect::<Result<_, _>>()
                .map(ListQuery::Ids),
            _ => Err(CommandError::Syntax),
        }
    }

    pub fn matches(&self, line: &ClientLine) -> bool {
        match self {
            ListQuery::All => true,
            ListQuery::Type(kind) => line.kind() == *kind,
            ListQuery::Ids(ids) => ids.iter().any(|&id| id >= 0 && id as u64 == line.id),
        }
    }

    /// The listing of `lines` (in any order): by id, or in the order the ids were asked.
    pub fn render(&self, mut lines: Vec<(u64, Bytes)>) -> Bytes {
        lines.sort_unstable_by_key(|(id, _)| *id);
        let mut out = Vec::new();
        let mut push = |line: &Bytes| {
            out.extend_from_slice(line);
            out.push(b'\n');
        };
        match self {
            ListQuery::Ids(ids) => {
                for &id in ids {
                    if let Ok(at) = lines.binary_search_by_key(&(id as u64), |(id, _)| *id) {
                        push(&lines[at].1);
                    }
                }
            }
            _ => lines.iter().for_each(|(_, line)| push(line)),
        }
        Bytes::from(out)
    }
}

/// CLIENT KILL's filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillFilter {
    /// `CLIENT KILL addr:port`: replies OK or "No such client" instead of a count, and may
    /// kill the caller.
    pub old_form: bool,
    pub addr: Option<Bytes>,
    pub laddr: Option<Bytes>,
    pub kind: Option<ClientType>,
    pub id: Option<u64>,
    /// USER: connections authenticated as this user (the session checks that it exists).
    pub user: Option<Bytes>,
    /// Spare the calling connection (the default in the new form).
    pub skip_me: bool,
}

impl KillFilter {
    /// The arguments after `CLIENT KILL` (at least one: the table checks arity), checked in
    /// Redis 7.0's order.
    pub fn parse(args: &[Bytes]) -> Result<KillFilter, CommandError> {
        let mut filter = KillFilter {
            old_form: false,
            addr: None,
            laddr: None,
            kind: None,
            id: None,
            user: None,
            skip_me: true,
        };
        if let [addr] = args {
            filter.old_form = true;
            filter.addr = Some(addr.clone());
            filter.skip_me = false;
            return Ok(filter);
        }
        let mut rest = args;
        while let [option, tail @ ..] = rest {
            let [value, tail @ ..] = tail else {
                return Err(CommandError::Syntax);
            };
            rest = tail;
            match option.to_ascii_lowercase().as_slice() {
                b"id" => {
                    let too_low =
                        || CommandError::Text("ERR client-id should be greater than 0".into());
                    let id = parse_i64(value).ok_or_else(too_low)?;
                    filter.id = Some(
                        u64::try_from(id)
                            .ok()
                            .filter(|&id| id > 0)
                            .ok_or_else(too_low)?,
                    );
                }
                b"type" => filter.kind = Some(ClientType::parse(value)?),
                b"addr" => filter.addr = Some(value.clone()),
                b"laddr" => filter.laddr = Some(value.clone()),
                b"user" => filter.user = Some(value.clone()),
                b"skipme" => {
                    filter.skip_me = if value.eq_ignore_ascii_case(b"yes") {
                        true
                    } else if value.eq_ignore_ascii_case(b"no") {
                        false
                    } else {
                        return Err(CommandError::Syntax);
                    }
                }
                _ => return Err(CommandError::Syntax),
            }
        }
        Ok(filter)
    }

    /// Whether the connection of `line` is to be killed (`is_caller`: it sent the KILL).
    pub fn matches(&self, line: &ClientLine, is_caller: bool) -> bool {
        self.addr
            .as_ref()
            .is_none_or(|addr| addr.as_ref() == line.addr.as_bytes())
            && self
                .laddr
                .as_ref()
                .is_none_or(|laddr| laddr.as_ref() == line.laddr.as_bytes())
            && self.kind.is_none_or(|kind| kind == line.kind())
            && self.id.is_none_or(|id| id == line.id)
            && self.user.as_ref().is_none_or(|user| {
                let name: &[u8] = if line.user.is_empty() {
                    b"default"
                } else {
                    &line.user
                };
                user.as_ref() == name
            })
            && !(is_caller && self.skip_me)
    }

    /// KILL's reply given how many connections it killed.
    pub fn reply(&self, killed: i64) -> crate::reply::Reply {
        use crate::reply::Reply;
        match (self.old_form, killed) {
            (true, 0) => Reply::error("ERR No such client"),
            (true, _) => Reply::ok(),
            (false, n) => Reply::Integer(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::Reply;

    fn args(parts: &[&str]) -> Vec<Bytes> {
        parts
            .iter()
            .map(|p| Bytes::copy_from_slice(p.as_bytes()))
            .collect()
    }

    fn err(error: CommandError) -> String {
        match Reply::from(error) {
            Reply::Error(text) => String::from_utf8_lossy(&text).into_owned(),
            other => panic!("not an error: {other:?}"),
        }
    }

    fn line(id: u64) -> ClientLine {
        ClientLine {
            id,
            addr: format!("127.0.0.1:{}", 40000 + id),
            laddr: "127.0.0.1:6379".into(),
            fd: 8,
            multi: -1,
            resp: 2,
            redir: -1,
            ..ClientLine::default()
        }
    }

    #[test]
    fn a_line_has_redis_fields_in_order() {
        let mut client = line(7);
        client.name = Bytes::from_static(b"worker");
        client.flags.multi = true;
        client.multi = 2;
        client.cmd = Some("client|list");
        let text = client.format();
        let keys: Vec<&str> = text
            .split(' ')
            .map(|field| field.split_once('=').expect("key=value").0)
            .collect();
        assert_eq!(
            keys.join(" "),
            "id addr laddr fd name age idle flags db sub psub ssub multi qbuf qbuf-free \
             argv-mem multi-mem rbs rbp obl oll omem tot-mem events cmd user redir resp \
             lib-name lib-ver"
        );
        assert!(text.starts_with("id=7 addr=127.0.0.1:40007 laddr=127.0.0.1:6379 fd=8 name=worker"));
        assert!(text.contains(" flags=x db=0 sub=0 psub=0 ssub=0 multi=2 "));
        assert!(text.contains(" cmd=client|list user=default redir=-1 resp=2 "));
        assert!(line(1).format().contains(" flags=N "), "no flag is N");
        assert!(
            line(1).format().contains(" cmd=NULL "),
            "no command yet is NULL"
        );
    }

    #[test]
    fn list_arguments_as_redis() {
        assert_eq!(ListQuery::parse(&[]), Ok(ListQuery::All));
        assert_eq!(
            ListQuery::parse(&args(&["TYPE", "PubSub"])),
            Ok(ListQuery::Type(ClientType::PubSub))
        );
        assert_eq!(
            ListQuery::parse(&args(&["id", "3", "-1", "3"])),
            Ok(ListQuery::Ids(vec![3, -1, 3]))
        );
        assert_eq!(
            err(ListQuery::parse(&args(&["type", "x"])).unwrap_err()),
            "ERR Unknown client type 'x'"
        );
        assert_eq!(
            err(ListQuery::parse(&args(&["id", "1", "x"])).unwrap_err()),
            "ERR Invalid client ID"
        );
        for bad in [&["type"][..], &["id"], &["foo"], &["type", "normal", "x"]] {
            assert_eq!(
                ListQuery::parse(&args(bad)),
                Err(CommandError::Syntax),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn listings_are_by_id_or_in_the_order_asked() {
        let lines = vec![
            (5, Bytes::from_static(b"five")),
            (2, Bytes::from_static(b"two")),
        ];
        assert_eq!(ListQuery::All.render(lines.clone()), "two\nfive\n");
        assert_eq!(
            ListQuery::Ids(vec![5, 9, 2, 5]).render(lines),
            "five\ntwo\nfive\n"
        );
        assert_eq!(ListQuery::All.render(Vec::new()), "");
    }

    #[test]
    fn kill_arguments_as_redis() {
        let old = KillFilter::parse(&args(&["1.2.3.4:5"])).unwrap();
        assert!(old.old_form && !old.skip_me);
        assert_eq!(old.reply(0), Reply::error("ERR No such client"));
        assert_eq!(old.reply(1), Reply::ok());
        let new =
            KillFilter::parse(&args(&["ID", "4", "skipme", "NO", "user", "default"])).unwrap();
        assert_eq!(
            (new.id, new.skip_me, new.user.clone()),
            (Some(4), false, Some(Bytes::from_static(b"default")))
        );
        assert_eq!(new.reply(0), Reply::Integer(0));
        for (bad, error) in [
            (&["id", "0"][..], "ERR client-id should be greater than 0"),
            (&["id", "x"], "ERR client-id should be greater than 0"),
            (&["type", "x", "id", "0"], "ERR Unknown client type 'x'"),
            (&["skipme", "maybe"], "ERR syntax error"),
            (&["id", "1", "skipme"], "ERR syntax error"),
            (&["maxage", "1"], "ERR syntax error"),
        ] {
            assert_eq!(
                err(KillFilter::parse(&args(bad)).unwrap_err()),
                error,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn kill_picks_by_every_filter_and_spares_the_caller() {
        let target = line(3);
        let by = |parts: &[&str]| KillFilter::parse(&args(parts)).unwrap();
        assert!(
            by(&["127.0.0.1:40003"]).matches(&target, true),
            "old form kills the caller"
        );
        assert!(!by(&["127.0.0.1:40004"]).matches(&target, false));
        assert!(by(&["id", "3"]).matches(&target, false));
        assert!(
            !by(&["id", "3"]).matches(&target, true),
            "SKIPME yes by default"
        );
        assert!(by(&["id", "3", "skipme", "no"]).matches(&target, true));
        assert!(by(&["laddr", "127.0.0.1:6379", "type", "normal"]).matches(&target, false));
        assert!(!by(&["type", "pubsub"]).matches(&target, false));
        assert!(by(&["user", "default"]).matches(&target, false));
        assert!(!by(&["user", "alice"]).matches(&target, false));
    }
}
