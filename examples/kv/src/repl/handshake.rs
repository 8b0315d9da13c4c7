//! The replica's side of the replication handshake, as Redis 7.0 runs it: PING, AUTH when
//! a `masterauth` is set, `REPLCONF listening-port`, `REPLCONF capa eof capa psync2`, then
//! `PSYNC <replid> <offset>` (or `PSYNC ? -1` with nothing to continue from). A replica
//! with several shards offers per-shard streams before PSYNC (`REPLCONF shard-streams`,
//! see [`super::shards`]); any answer but the master's consent leaves one stream.
//!
//! Sans-I/O: [`Handshake::start`] gives the first bytes to send, each status line the master
//! answers goes to [`Handshake::on_line`], which says what to send next or how the
//! handshake ended. The master's keep-alive newlines (sent while it prepares a snapshot) are
//! skipped by the caller's line reader ([`take_line`]).

use std::fmt;

use bytes::{Bytes, BytesMut};

use super::shard_link;
use super::shards::{self, StreamMode};
use crate::resp::{write_array_header, write_bulk};

/// What the handshake needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeConfig {
    /// `masteruser` / `masterauth`: `AUTH [user] password` after the PING.
    pub auth: Option<(Option<Bytes>, Bytes)>,
    /// This node's client port, announced with `REPLCONF listening-port`.
    pub listening_port: u16,
    /// `replica-announce-ip`, announced with `REPLCONF ip-address`.
    pub announce_ip: Option<Bytes>,
    /// The master's replication id and the next offset wanted, when there is history to
    /// continue from.
    pub resume: Option<(String, u64)>,
    /// This node's shards: with more than one, per-shard streams are offered.
    pub shards: usize,
    /// This connection is shard `i`'s own link (after the master consented to per-shard
    /// streams): it asks for it instead of offering, and only the master's `+SHARD-LINK
    /// <i>` lets it go on (see [`super::shard_link`]).
    pub link: Option<usize>,
}

/// How the handshake ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `+FULLRESYNC <replid> <offset>`: a snapshot follows; the stream after it starts at
    /// `offset`.
    FullResync { replid: String, offset: u64 },
    /// `+CONTINUE [<replid>]`: the stream goes on from the offset asked; a new id when the
    /// master's history changed (it was promoted), to remember from now on.
    Continue { new_replid: Option<String> },
    /// `+SHARD-STREAMS <n>`: the master consented to shard links. This connection sends no
    /// PSYNC: each replica shard opens its own link ([`HandshakeConfig::link`]).
    ShardLinks(usize),
}

/// What to do after a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Send(Bytes),
    Done(Outcome),
}

/// Why the handshake failed (the link is dropped and tried again later).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeError {
    /// An error reply the step cannot go past (AUTH refused, PSYNC refused ...).
    Refused { step: &'static str, reply: String },
    /// A reply that is not what the step expects.
    Unexpected { step: &'static str, reply: String },
    /// The master cannot serve a sync now (`-LOADING`, `-NOMASTERLINK`, ...): try later.
    TryLater(String),
    /// A shard's link request was refused: the node goes back to the single stream.
    LinkRefused(String),
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Redis's own log line, which tools and its test suite look for.
            HandshakeError::Refused {
                step: "AUTH",
                reply,
            } => write!(f, "Unable to AUTH to MASTER: {reply}"),
            HandshakeError::Refused { step, reply } => {
                write!(f, "the master refused {step}: {reply}")
            }
            HandshakeError::Unexpected { step, reply } => {
                write!(f, "unexpected reply to {step}: {reply}")
            }
            HandshakeError::TryLater(reply) => write!(f, "the master cannot sync now: {reply}"),
            HandshakeError::LinkRefused(reply) => {
                write!(f, "the master refused this shard's link: {reply}")
            }
        }
    }
}

impl std::error::Error for HandshakeError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Ping,
    Auth,
    Port,
    Ip,
    Capa,
    Shards,
    Psync,
    Done,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Ping => "PING",
            Step::Auth => "AUTH",
            Step::Port => "REPLCONF listening-port",
            Step::Ip => "REPLCONF ip-address",
            Step::Capa => "REPLCONF capa",
            Step::Shards => "REPLCONF shard-streams",
            Step::Psync => "PSYNC",
            Step::Done => "nothing",
        }
    }
}

/// The handshake in progress.
#[derive(Debug)]
pub struct Handshake {
    config: HandshakeConfig,
    step: Step,
    mode: StreamMode,
}

impl Handshake {
    /// A new handshake and the PING to send first.
    pub fn start(config: HandshakeConfig) -> (Handshake, Bytes) {
        let first = request(&[b"PING"]);
        (
            Handshake {
                config,
                step: Step::Ping,
                mode: StreamMode::Single,
            },
            first,
        )
    }

    /// The step waiting for its reply (for logs and ROLE's `handshake` state).
    pub fn step(&self) -> &'static str {
        self.step.name()
    }

    /// The streams agreed with the master (one until it consents to per-shard streams).
    pub fn stream_mode(&self) -> StreamMode {
        self.mode
    }

    /// The master's reply to the step in flight: one status or error line, without its CRLF.
    pub fn on_line(&mut self, line: &[u8]) -> Result<Next, HandshakeError> {
        let text = String::from_utf8_lossy(line).into_owned();
        let step = self.step;
        let error = line.first() == Some(&b'-');
        match step {
            Step::Ping => {
                // Redis accepts these from a master with requirepass: AUTH comes next.
                if error
                    && !(text.starts_with("-NOAUTH")
                        || text.starts_with("-NOPERM")
                        || text.starts_with("-ERR operation not permitted"))
                {
                    return Err(HandshakeError::Refused {
                        step: step.name(),
                        reply: text,
                    });
                }
                self.after_ping()
            }
            Step::Auth => {
                if error {
                    return Err(HandshakeError::Refused {
                        step: step.name(),
                        reply: text,
                    });
                }
                Ok(self.send_port())
            }
            // Old masters do not know these: Redis only logs the error and goes on.
            Step::Port => Ok(self.after_port()),
            Step::Ip => Ok(self.send_capa()),
            Step::Capa => Ok(self.send_shards()),
            // A shard's link goes on only with the master's `+SHARD-LINK <i>`: anything
            // else ends it (the replica then falls back to the single stream).
            Step::Shards if self.config.link.is_some() => {
                let shard = self.config.link.unwrap_or_default();
                if !shard_link::on_link_reply(line, shard) {
                    return Err(HandshakeError::LinkRefused(text));
                }
                self.mode = StreamMode::PerShard(self.config.shards);
                Ok(self.send_psync())
            }
            // redis-server's error or a decline: PSYNC on this connection; consent (see
            // `shards::on_reply`): the shards' own links take over.
            Step::Shards => {
                self.mode = shards::on_reply(line, self.config.shards);
                match self.mode {
                    StreamMode::Single => Ok(self.send_psync()),
                    StreamMode::PerShard(n) => {
                        self.step = Step::Done;
                        Ok(Next::Done(Outcome::ShardLinks(n)))
                    }
                }
            }
            Step::Psync => {
                self.step = Step::Done;
                psync_outcome(&text).map(Next::Done)
            }
            Step::Done => Err(HandshakeError::Unexpected {
                step: step.name(),
                reply: text,
            }),
        }
    }

    fn after_ping(&mut self) -> Result<Next, HandshakeError> {
        match &self.config.auth {
            Some((user, password)) => {
                self.step = Step::Auth;
                let mut args: Vec<&[u8]> = vec![b"AUTH"];
                if let Some(user) = user {
                    args.push(user);
                }
                args.push(password);
                Ok(Next::Send(request(&args)))
            }
            None => Ok(self.send_port()),
        }
    }

    fn send_port(&mut self) -> Next {
        self.step = Step::Port;
        let port = self.config.listening_port.to_string();
        Next::Send(request(&[b"REPLCONF", b"listening-port", port.as_bytes()]))
    }

    fn after_port(&mut self) -> Next {
        match &self.config.announce_ip {
            Some(ip) => {
                self.step = Step::Ip;
                Next::Send(request(&[b"REPLCONF", b"ip-address", ip]))
            }
            None => self.send_capa(),
        }
    }

    fn send_capa(&mut self) -> Next {
        self.step = Step::Capa;
        Next::Send(request(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]))
    }

    fn send_shards(&mut self) -> Next {
        let ask = match self.config.link {
            Some(shard) => Some(shard_link::link_request(self.config.shards, shard)),
            None => shards::offer(self.config.shards),
        };
        match ask {
            Some(offer) => {
                self.step = Step::Shards;
                Next::Send(offer)
            }
            None => self.send_psync(),
        }
    }

    fn send_psync(&mut self) -> Next {
        self.step = Step::Psync;
        let (id, offset) = match &self.config.resume {
            Some((id, next)) => (id.clone(), next.to_string()),
            None => ("?".to_owned(), "-1".to_owned()),
        };
        Next::Send(request(&[b"PSYNC", id.as_bytes(), offset.as_bytes()]))
    }
}

/// The outcome of PSYNC's reply line.
fn psync_outcome(text: &str) -> Result<Outcome, HandshakeError> {
    let unexpected = || HandshakeError::Unexpected {
        step: "PSYNC",
        reply: text.to_owned(),
    };
    if let Some(rest) = text.strip_prefix("+FULLRESYNC") {
        let mut words = rest.split_ascii_whitespace();
        let (Some(replid), Some(offset), None) = (words.next(), words.next(), words.next()) else {
            return Err(unexpected());
        };
        let offset = offset.parse::<u64>().map_err(|_| unexpected())?;
        if !is_replid(replid) {
            return Err(unexpected());
        }
        return Ok(Outcome::FullResync {
            replid: replid.to_owned(),
            offset,
        });
    }
    if let Some(rest) = text.strip_prefix("+CONTINUE") {
        let new_replid = match rest.split_ascii_whitespace().next() {
            None => None,
            Some(id) if is_replid(id) => Some(id.to_owned()),
            Some(_) => return Err(unexpected()),
        };
        return Ok(Outcome::Continue { new_replid });
    }
    if text.starts_with("-NOMASTERLINK") || text.starts_with("-LOADING") {
        return Err(HandshakeError::TryLater(text.to_owned()));
    }
    if text.starts_with('-') {
        return Err(HandshakeError::Refused {
            step: "PSYNC",
            reply: text.to_owned(),
        });
    }
    Err(unexpected())
}

/// A replication id: 40 hex characters.
pub fn is_replid(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Takes one line (without its CRLF) off the front of `input`, skipping the bare newlines a
/// master sends to keep the link alive while it prepares a snapshot. `None` until a whole
/// line is there; a line longer than `max` is an error (the link is dropped).
pub fn take_line(input: &mut BytesMut, max: usize) -> Result<Option<Bytes>, HandshakeError> {
    loop {
        while input.first() == Some(&b'\n') {
            let _ = input.split_to(1);
        }
        let Some(end) = input.iter().position(|&b| b == b'\n') else {
            if input.len() > max {
                return Err(HandshakeError::Unexpected {
                    step: "reading a reply",
                    reply: format!("a line longer than {max} bytes"),
                });
            }
            return Ok(None);
        };
        let mut line = input.split_to(end + 1);
        line.truncate(end);
        if line.last() == Some(&b'\r') {
            line.truncate(end - 1);
        }
        if !line.is_empty() {
            return Ok(Some(line.freeze()));
        }
    }
}

/// A command as a RESP array of bulk strings.
pub fn request(args: &[&[u8]]) -> Bytes {
    let mut out = BytesMut::new();
    write_array_header(&mut out, args.len());
    for arg in args {
        write_bulk(&mut out, arg);
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef01234567";

    fn config() -> HandshakeConfig {
        HandshakeConfig {
            auth: None,
            listening_port: 7000,
            announce_ip: None,
            resume: None,
            shards: 1,
            link: None,
        }
    }

    fn sent(next: Next) -> String {
        match next {
            Next::Send(bytes) => String::from_utf8(bytes.to_vec()).unwrap(),
            other => panic!("expected a send, got {other:?}"),
        }
    }

    #[test]
    fn a_fresh_replica_asks_for_a_full_sync() {
        let (mut hs, first) = Handshake::start(config());
        assert_eq!(&first[..], b"*1\r\n$4\r\nPING\r\n");
        let port = sent(hs.on_line(b"+PONG").unwrap());
        assert_eq!(
            port,
            "*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$4\r\n7000\r\n"
        );
        let capa = sent(hs.on_line(b"+OK").unwrap());
        assert!(
            capa.contains("capa\r\n$3\r\neof\r\n$4\r\ncapa\r\n$6\r\npsync2"),
            "{capa}"
        );
        let psync = sent(hs.on_line(b"+OK").unwrap());
        assert_eq!(psync, "*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n");
        let done = hs
            .on_line(format!("+FULLRESYNC {ID} 42").as_bytes())
            .unwrap();
        assert_eq!(
            done,
            Next::Done(Outcome::FullResync {
                replid: ID.into(),
                offset: 42
            })
        );
    }

    #[test]
    fn auth_and_resume() {
        let (mut hs, _) = Handshake::start(HandshakeConfig {
            auth: Some((Some("repl".into()), "secret".into())),
            announce_ip: Some("10.0.0.1".into()),
            resume: Some((ID.into(), 101)),
            ..config()
        });
        // A master with requirepass refuses PING before AUTH: that is fine.
        let auth = sent(hs.on_line(b"-NOAUTH Authentication required.").unwrap());
        assert!(
            auth.starts_with("*3\r\n$4\r\nAUTH\r\n$4\r\nrepl\r\n$6\r\nsecret"),
            "{auth}"
        );
        let _port = sent(hs.on_line(b"+OK").unwrap());
        // An old master's error to REPLCONF is only noted.
        let ip = sent(hs.on_line(b"-ERR unknown").unwrap());
        assert!(ip.contains("ip-address"), "{ip}");
        let _capa = sent(hs.on_line(b"+OK").unwrap());
        let psync = sent(hs.on_line(b"+OK").unwrap());
        assert!(
            psync.ends_with(&format!("{ID}\r\n$3\r\n101\r\n")),
            "{psync}"
        );
        assert_eq!(
            hs.on_line(b"+CONTINUE").unwrap(),
            Next::Done(Outcome::Continue { new_replid: None })
        );
    }

    #[test]
    fn continue_with_a_new_history() {
        let (mut hs, _) = Handshake::start(config());
        for line in [&b"+PONG"[..], b"+OK", b"+OK"] {
            hs.on_line(line).unwrap();
        }
        let other = "f".repeat(40);
        assert_eq!(
            hs.on_line(format!("+CONTINUE {other}").as_bytes()).unwrap(),
            Next::Done(Outcome::Continue {
                new_replid: Some(other)
            })
        );
    }

    #[test]
    fn a_replica_with_shards_offers_per_shard_streams() {
        let answers: [(&[u8], StreamMode); 3] = [
            (
                b"-ERR Unrecognized REPLCONF option: shard-streams",
                StreamMode::Single,
            ),
            (b"+SINGLE-STREAM not-served", StreamMode::Single),
            (b"+SHARD-STREAMS 4", StreamMode::PerShard(4)),
        ];
        for (answer, mode) in answers {
            let (mut hs, _) = Handshake::start(HandshakeConfig {
                shards: 4,
                ..config()
            });
            for line in [&b"+PONG"[..], b"+OK"] {
                hs.on_line(line).unwrap();
            }
            let offer = sent(hs.on_line(b"+OK").unwrap());
            assert!(offer.contains("shard-streams\r\n$1\r\n4\r\n"), "{offer}");
            assert_eq!(hs.step(), "REPLCONF shard-streams");
            match hs.on_line(answer).unwrap() {
                Next::Done(Outcome::ShardLinks(n)) => {
                    assert_eq!(StreamMode::PerShard(n), mode);
                }
                next => assert!(sent(next).contains("PSYNC"), "{answer:?}"),
            }
            assert_eq!(hs.stream_mode(), mode);
        }
        // One shard: no offer, PSYNC right after capa.
        let (mut hs, _) = Handshake::start(config());
        for line in [&b"+PONG"[..], b"+OK"] {
            hs.on_line(line).unwrap();
        }
        assert!(sent(hs.on_line(b"+OK").unwrap()).contains("PSYNC"));
        assert_eq!(hs.stream_mode(), StreamMode::Single);
    }

    #[test]
    fn a_shards_link_asks_for_its_shard_and_needs_the_masters_consent() {
        let answers: [(&[u8], bool); 4] = [
            (b"+SHARD-LINK 2", true),
            (b"+SHARD-LINK 1", false),
            (b"+SINGLE-STREAM not-served", false),
            (b"-ERR Unrecognized REPLCONF option: shard-streams", false),
        ];
        for (answer, linked) in answers {
            let (mut hs, _) = Handshake::start(HandshakeConfig {
                shards: 4,
                link: Some(2),
                resume: Some((ID.into(), 7)),
                ..config()
            });
            for line in [&b"+PONG"[..], b"+OK"] {
                hs.on_line(line).unwrap();
            }
            let ask = sent(hs.on_line(b"+OK").unwrap());
            assert_eq!(ask.as_bytes(), &shard_link::link_request(4, 2)[..]);
            match hs.on_line(answer) {
                Ok(next) => {
                    assert!(linked, "{answer:?} taken for consent");
                    assert!(sent(next).ends_with(&format!("{ID}\r\n$1\r\n7\r\n")));
                    assert_eq!(hs.stream_mode(), StreamMode::PerShard(4));
                }
                Err(error) => {
                    assert!(!linked, "{answer:?}: {error}");
                    assert!(matches!(error, HandshakeError::LinkRefused(_)));
                }
            }
        }
    }

    #[test]
    fn refusals_end_the_handshake() {
        let (mut hs, _) = Handshake::start(HandshakeConfig {
            auth: Some((None, "bad".into())),
            ..config()
        });
        hs.on_line(b"+PONG").unwrap();
        let refused = hs.on_line(b"-WRONGPASS invalid username-password pair");
        assert!(matches!(
            refused,
            Err(HandshakeError::Refused { step: "AUTH", .. })
        ));
        // Redis's log line for it (the reply as received), which its test suite waits for.
        assert_eq!(
            refused.unwrap_err().to_string(),
            "Unable to AUTH to MASTER: -WRONGPASS invalid username-password pair"
        );
        let (mut hs, _) = Handshake::start(config());
        assert!(hs.on_line(b"-ERR something else").is_err());
        let (mut hs, _) = Handshake::start(config());
        for line in [&b"+PONG"[..], b"+OK", b"+OK"] {
            hs.on_line(line).unwrap();
        }
        assert!(matches!(
            hs.on_line(b"-NOMASTERLINK Can't SYNC while not connected with my master"),
            Err(HandshakeError::TryLater(_))
        ));
        let (mut hs, _) = Handshake::start(config());
        for line in [&b"+PONG"[..], b"+OK", b"+OK"] {
            hs.on_line(line).unwrap();
        }
        assert!(hs.on_line(b"+FULLRESYNC short 1").is_err());
    }

    #[test]
    fn lines_skip_keepalive_newlines() {
        let mut input = BytesMut::from(&b"\n\n+FULL"[..]);
        assert_eq!(take_line(&mut input, 100).unwrap(), None);
        input.extend_from_slice(b"RESYNC x 0\r\n\n$5\r\n");
        assert_eq!(
            take_line(&mut input, 100).unwrap().as_deref(),
            Some(&b"+FULLRESYNC x 0"[..])
        );
        assert_eq!(
            take_line(&mut input, 100).unwrap().as_deref(),
            Some(&b"$5"[..])
        );
        assert!(input.is_empty());
        let mut long = BytesMut::from(&[b'a'; 20][..]);
        assert!(take_line(&mut long, 10).is_err());
    }
}
