//! The cluster bus's messages. Only corewire-kv nodes speak it (Redis's binary bus format is
//! not implemented), so it is plain RESP: each message is one array of bulk strings, framed
//! and bounded by the same parser as client requests.
//!
//! A message carries what Redis's header and gossip section carry that this cluster uses:
//! the sender's identity and address, its epochs, the slots it claims (a replica: its
//! primary's, with the primary's config epoch, as in Redis), whose replica it is, its
//! replication offset, and a few other nodes it knows with what it thinks of their health
//! (so a node met by one member gets to know all of them, and failure reports spread).

use bytes::{Bytes, BytesMut};

use super::node::{NodeAddr, NodeId};
use super::slots::SlotSet;
use crate::number::parse_i64;
use crate::resp::{self, ParserLimits};

/// First element of every message: the protocol and its version.
const MAGIC: &[u8] = b"corewire-bus/2";

/// Fixed fields before the gossip entries.
const HEADER_FIELDS: usize = 13;
const GOSSIP_FIELDS: usize = 5;

/// Header flag: the sender is a primary whose clients are paused for a manual failover,
/// and the offset it announces is final (Redis's `CLUSTERMSG_FLAG0_PAUSED`).
pub const FLAG_PAUSED: u64 = 1;
/// Header flag of a vote request: vote even though the primary is not failing (a manual
/// failover; Redis's `CLUSTERMSG_FLAG0_FORCEACK`).
pub const FLAG_FORCE_ACK: u64 = 2;

/// Nodes described in one message at most. Every node pings every other, so each learns
/// the whole membership within a few rounds even when it is larger than this.
pub const MAX_GOSSIP: usize = 64;

/// What the bus reader accepts: a bitmap is the largest bulk; the array holds the header
/// and at most [`MAX_GOSSIP`] entries.
pub fn parser_limits() -> ParserLimits {
    ParserLimits {
        max_bulk_len: 4096,
        max_array_len: HEADER_FIELDS + GOSSIP_FIELDS * MAX_GOSSIP,
        ..ParserLimits::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    Ping,
    Pong,
    /// A ping that asks the receiver to add the sender (CLUSTER MEET).
    Meet,
    /// The `subject` node is failing: a majority of primaries agreed.
    Fail,
    /// A replica asks the primaries for their vote to replace its failed primary.
    AuthRequest,
    /// A primary's vote.
    AuthAck,
    /// A replica asks its primary to pause writes for a manual failover.
    MfStart,
}

impl MessageKind {
    /// Every kind, in Redis's order (CLUSTER INFO lists them so).
    pub const ALL: [MessageKind; 7] = [
        MessageKind::Ping,
        MessageKind::Pong,
        MessageKind::Meet,
        MessageKind::Fail,
        MessageKind::AuthRequest,
        MessageKind::AuthAck,
        MessageKind::MfStart,
    ];

    /// Redis's name for the type (`cluster_stats_messages_<name>_sent`).
    pub fn name(self) -> &'static str {
        match self {
            MessageKind::Ping => "ping",
            MessageKind::Pong => "pong",
            MessageKind::Meet => "meet",
            MessageKind::Fail => "fail",
            MessageKind::AuthRequest => "auth-req",
            MessageKind::AuthAck => "auth-ack",
            MessageKind::MfStart => "mfstart",
        }
    }

    pub fn index(self) -> usize {
        MessageKind::ALL
            .iter()
            .position(|k| *k == self)
            .unwrap_or_default()
    }

    fn parse(text: &[u8]) -> Option<MessageKind> {
        MessageKind::ALL
            .into_iter()
            .find(|kind| kind.name().as_bytes() == text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipEntry {
    pub id: NodeId,
    pub addr: NodeAddr,
    /// The sender finds it unreachable (`fail?`).
    pub pfail: bool,
    /// The sender has it `fail`.
    pub fail: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: MessageKind,
    pub sender: NodeId,
    /// The sender's address as it knows it; an empty `ip` means "the one you see me from".
    pub addr: NodeAddr,
    pub current_epoch: u64,
    /// The sender's config epoch (a replica: its primary's).
    pub config_epoch: u64,
    /// The slots the sender claims to own (a replica: its primary's).
    pub slots: SlotSet,
    /// `Some`: the sender is a replica of that node.
    pub primary: Option<NodeId>,
    /// The sender's replication offset.
    pub offset: u64,
    /// [`FLAG_PAUSED`], [`FLAG_FORCE_ACK`].
    pub flags: u64,
    /// The node a FAIL message is about.
    pub subject: Option<NodeId>,
    pub gossip: Vec<GossipEntry>,
}

impl Message {
    pub fn encode(&self, out: &mut BytesMut) {
        resp::write_array_header(out, HEADER_FIELDS + GOSSIP_FIELDS * self.gossip.len());
        resp::write_bulk(out, MAGIC);
        resp::write_bulk(out, self.kind.name().as_bytes());
        resp::write_bulk(out, self.sender.as_bytes());
        write_addr(out, &self.addr);
        resp::write_bulk(out, self.current_epoch.to_string().as_bytes());
        resp::write_bulk(out, self.config_epoch.to_string().as_bytes());
        resp::write_bulk(out, self.slots.as_bytes());
        write_id(out, self.primary.as_ref());
        resp::write_bulk(out, self.offset.to_string().as_bytes());
        resp::write_bulk(out, self.flags.to_string().as_bytes());
        write_id(out, self.subject.as_ref());
        for entry in &self.gossip {
            resp::write_bulk(out, entry.id.as_bytes());
            write_addr(out, &entry.addr);
            let flags = u8::from(entry.pfail) | (u8::from(entry.fail) << 1);
            resp::write_bulk(out, flags.to_string().as_bytes());
        }
    }

    /// A message from the fields the RESP parser produced.
    pub fn decode(fields: &[Bytes]) -> Result<Message, String> {
        let bad = |what: &str| format!("bad cluster bus message: {what}");
        if fields.first().map(|f| &f[..]) != Some(MAGIC) {
            return Err(bad("not corewire-bus/1"));
        }
        if fields.len() < HEADER_FIELDS
            || !(fields.len() - HEADER_FIELDS).is_multiple_of(GOSSIP_FIELDS)
        {
            return Err(bad("wrong number of fields"));
        }
        let kind = MessageKind::parse(&fields[1]).ok_or_else(|| bad("unknown type"))?;
        let sender = NodeId::parse(&fields[2]).ok_or_else(|| bad("sender id"))?;
        let addr = read_addr(&fields[3..6]).ok_or_else(|| bad("sender address"))?;
        let number = |field: &Bytes, what: &str| {
            parse_i64(field)
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| bad(what))
        };
        let current_epoch = number(&fields[6], "epoch")?;
        let config_epoch = number(&fields[7], "epoch")?;
        let slots = SlotSet::from_bytes(&fields[8]).ok_or_else(|| bad("slot bitmap"))?;
        let primary = read_id(&fields[9]).ok_or_else(|| bad("primary id"))?;
        let offset = number(&fields[10], "offset")?;
        let flags = number(&fields[11], "flags")?;
        let subject = read_id(&fields[12]).ok_or_else(|| bad("subject id"))?;
        let gossip = fields[HEADER_FIELDS..]
            .chunks(GOSSIP_FIELDS)
            .map(|entry| {
                let flags = parse_i64(&entry[4])?;
                Some(GossipEntry {
                    id: NodeId::parse(&entry[0])?,
                    addr: read_addr(&entry[1..4])?,
                    pfail: flags & 1 != 0,
                    fail: flags & 2 != 0,
                })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("gossip entry"))?;
        Ok(Message {
            kind,
            sender,
            addr,
            current_epoch,
            config_epoch,
            slots,
            primary,
            offset,
            flags,
            subject,
            gossip,
        })
    }
}

/// An optional node id: empty for none.
fn write_id(out: &mut BytesMut, id: Option<&NodeId>) {
    resp::write_bulk(out, id.map_or(&[][..], NodeId::as_bytes));
}

/// `Some(None)`: the field is empty; `None`: it is malformed.
fn read_id(field: &Bytes) -> Option<Option<NodeId>> {
    if field.is_empty() {
        return Some(None);
    }
    NodeId::parse(field).map(Some)
}

fn write_addr(out: &mut BytesMut, addr: &NodeAddr) {
    resp::write_bulk(out, addr.ip.as_bytes());
    resp::write_bulk(out, addr.port.to_string().as_bytes());
    resp::write_bulk(out, addr.cport.to_string().as_bytes());
}

fn read_addr(fields: &[Bytes]) -> Option<NodeAddr> {
    let ip = std::str::from_utf8(&fields[0]).ok()?;
    if !ip.is_empty() && ip.parse::<std::net::IpAddr>().is_err() {
        return None;
    }
    let port = |field: &Bytes| u16::try_from(parse_i64(field)?).ok();
    Some(NodeAddr {
        ip: ip.to_owned(),
        port: port(&fields[1])?,
        cport: port(&fields[2])?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::RequestParser;

    fn sample() -> Message {
        Message {
            kind: MessageKind::Meet,
            sender: NodeId::from_random([1; 20]),
            addr: NodeAddr {
                ip: String::new(),
                port: 7000,
                cport: 17000,
            },
            current_epoch: 5,
            config_epoch: 3,
            slots: [0, 1, 16383].into_iter().collect(),
            primary: Some(NodeId::from_random([3; 20])),
            offset: 1234,
            flags: FLAG_PAUSED,
            subject: None,
            gossip: vec![GossipEntry {
                id: NodeId::from_random([2; 20]),
                addr: NodeAddr {
                    ip: "127.0.0.1".into(),
                    port: 7001,
                    cport: 17001,
                },
                pfail: true,
                fail: false,
            }],
        }
    }

    #[test]
    fn messages_round_trip_through_the_request_parser() {
        let mut wire = BytesMut::new();
        sample().encode(&mut wire);
        let mut parser = RequestParser::new(parser_limits());
        let fields = parser.parse(&mut wire).unwrap().unwrap();
        assert_eq!(Message::decode(&fields), Ok(sample()));
        assert!(wire.is_empty());
    }

    #[test]
    fn malformed_messages_are_refused() {
        let mut wire = BytesMut::new();
        sample().encode(&mut wire);
        let fields = RequestParser::new(parser_limits())
            .parse(&mut wire)
            .unwrap()
            .unwrap();
        let mut wrong = fields.clone();
        wrong[0] = Bytes::from("corewire-bus/9");
        assert!(Message::decode(&wrong).is_err());
        let mut wrong = fields.clone();
        wrong[8] = Bytes::from("short");
        assert!(Message::decode(&wrong).is_err());
        let mut wrong = fields.clone();
        wrong[4] = Bytes::from("70000");
        assert!(Message::decode(&wrong).is_err());
        let mut wrong = fields.clone();
        wrong[9] = Bytes::from("not-an-id");
        assert!(Message::decode(&wrong).is_err());
        assert!(Message::decode(&fields[..14]).is_err());
    }
}
