//! The cluster bus's messages. Only corewire-kv nodes speak it (Redis's binary bus format is
//! not implemented), so it is plain RESP: each message is one array of bulk strings, framed
//! and bounded by the same parser as client requests.
//!
//! A message carries what Redis's header and gossip section carry that this cluster uses:
//! the sender's identity and address, its epochs, the slots it claims, and a few other
//! nodes it knows (so a node met by one member gets to know all of them).

use bytes::{Bytes, BytesMut};

use super::node::{NodeAddr, NodeId};
use super::slots::SlotSet;
use crate::number::parse_i64;
use crate::resp::{self, ParserLimits};

/// First element of every message: the protocol and its version.
const MAGIC: &[u8] = b"corewire-bus/1";

/// Fixed fields before the gossip entries.
const HEADER_FIELDS: usize = 9;
const GOSSIP_FIELDS: usize = 4;

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
}

impl MessageKind {
    pub fn name(self) -> &'static str {
        match self {
            MessageKind::Ping => "ping",
            MessageKind::Pong => "pong",
            MessageKind::Meet => "meet",
        }
    }

    fn parse(text: &[u8]) -> Option<MessageKind> {
        [MessageKind::Ping, MessageKind::Pong, MessageKind::Meet]
            .into_iter()
            .find(|kind| kind.name().as_bytes() == text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipEntry {
    pub id: NodeId,
    pub addr: NodeAddr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: MessageKind,
    pub sender: NodeId,
    /// The sender's address as it knows it; an empty `ip` means "the one you see me from".
    pub addr: NodeAddr,
    pub current_epoch: u64,
    pub config_epoch: u64,
    /// The slots the sender claims to own.
    pub slots: SlotSet,
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
        for entry in &self.gossip {
            resp::write_bulk(out, entry.id.as_bytes());
            write_addr(out, &entry.addr);
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
        let epoch = |field: &Bytes| {
            parse_i64(field)
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| bad("epoch"))
        };
        let current_epoch = epoch(&fields[6])?;
        let config_epoch = epoch(&fields[7])?;
        let slots = SlotSet::from_bytes(&fields[8]).ok_or_else(|| bad("slot bitmap"))?;
        let gossip = fields[HEADER_FIELDS..]
            .chunks(GOSSIP_FIELDS)
            .map(|entry| {
                Some(GossipEntry {
                    id: NodeId::parse(&entry[0])?,
                    addr: read_addr(&entry[1..])?,
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
            gossip,
        })
    }
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
            gossip: vec![GossipEntry {
                id: NodeId::from_random([2; 20]),
                addr: NodeAddr {
                    ip: "127.0.0.1".into(),
                    port: 7001,
                    cport: 17001,
                },
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
        assert!(Message::decode(&fields[..10]).is_err());
    }
}
