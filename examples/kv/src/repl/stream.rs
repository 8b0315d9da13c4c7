//! The command stream a replica receives after the handshake (and the snapshot): RESP
//! requests, each counted in the replication offset by its bytes on the wire.
//!
//! Sans-I/O: [`StreamReader`] takes whole requests off the link's input and classifies them
//! ([`Item`]): commands to apply (a `MULTI` ... `EXEC` block comes out as one
//! [`Command::Transaction`]), `REPLCONF GETACK` to answer, and what only counts (PING,
//! SELECT, other REPLCONFs). [`Applied`] tracks which of the dispatched commands have run,
//! so the offset the replica acknowledges covers only applied commands.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use crate::command::{Command, Transaction, TxnItem};
use crate::reply::Reply;
use crate::resp::{ParserLimits, ProtocolError, RequestParser};

/// What one request (or one transaction block) of the stream asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// Run it on the shard(s) owning its keys, as the master's client.
    Apply(Command),
    /// `REPLCONF GETACK *`: acknowledge the offset.
    GetAck,
    /// `REPLCONF BARRIER`: the next item (a MULTI/EXEC block) is this shard's part of
    /// transaction `id` over the shards `involved` (see [`super::barrier`]).
    Barrier {
        id: super::barrier::BarrierId,
        involved: u64,
    },
    /// `SELECT db`: the database the commands after it are for.
    Select(i64),
    /// Counts in the offset, changes nothing: PING, other REPLCONFs.
    Skip,
    /// A request this node cannot parse (logged; the stream goes on, as a Redis replica's
    /// master client gets an error reply nobody reads).
    Invalid { name: String, why: String },
}

/// An item and the replication offset just after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Framed {
    pub item: Item,
    pub end: u64,
}

/// Why the stream cannot go on (the link is dropped; a partial resync starts over from the
/// last offset applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamError {
    Protocol(ProtocolError),
    /// A MULTI block longer than this node buffers.
    BlockTooLong(usize),
    /// MULTI inside a block.
    NestedMulti,
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Protocol(e) => write!(f, "protocol error in the master's stream: {e}"),
            StreamError::BlockTooLong(n) => {
                write!(
                    f,
                    "a MULTI block in the master's stream passed {n} commands"
                )
            }
            StreamError::NestedMulti => f.write_str("MULTI inside a MULTI block"),
        }
    }
}

impl std::error::Error for StreamError {}

/// Commands buffered for one MULTI block at most.
pub const MAX_BLOCK: usize = 1 << 20;

/// Frames the master's stream.
#[derive(Debug)]
pub struct StreamReader {
    parser: RequestParser,
    /// The offset after the last request taken off the input.
    offset: u64,
    /// The MULTI block being read, and the offset before its MULTI.
    block: Option<Vec<TxnItem>>,
    block_start: u64,
    /// Bytes of a request the parser took in but has not completed yet.
    partial: u64,
}

impl StreamReader {
    /// A reader whose first byte is at replication offset `offset` + 1 (Redis's offsets
    /// count bytes: `offset` is the last byte already had).
    pub fn new(offset: u64, limits: ParserLimits) -> StreamReader {
        StreamReader {
            parser: RequestParser::new(limits),
            offset,
            block: None,
            block_start: offset,
            partial: 0,
        }
    }

    /// The offset of the last byte taken off the input (Redis's `slave_read_repl_offset`,
    /// less what is still buffered).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Bytes read but not yet part of a whole request (in the parser).
    pub fn partial(&self) -> u64 {
        self.partial
    }

    /// Where a new link must continue from: before the open MULTI block, if any (its
    /// commands were not applied and must come again with their MULTI).
    pub fn resume_offset(&self) -> u64 {
        if self.block.is_some() {
            self.block_start
        } else {
            self.offset
        }
    }

    /// Whether a MULTI block is open (its commands are held until its EXEC).
    pub fn in_block(&self) -> bool {
        self.block.is_some()
    }

    /// The next item, taking its bytes off `input`; `None` until a whole one is there.
    pub fn next(&mut self, input: &mut BytesMut) -> Result<Option<Framed>, StreamError> {
        loop {
            let before = input.len();
            let parsed = self.parser.parse(input).map_err(StreamError::Protocol)?;
            // The parser keeps what it took of an incomplete request: counted once whole.
            self.partial += (before - input.len()) as u64;
            let Some(args) = parsed else {
                return Ok(None);
            };
            let start = self.offset;
            self.offset += std::mem::take(&mut self.partial);
            if let Some(item) = self.classify(args, start)? {
                return Ok(Some(Framed {
                    item,
                    end: self.offset,
                }));
            }
        }
    }

    /// `None`: the request went into the open MULTI block.
    fn classify(&mut self, args: Vec<Bytes>, start: u64) -> Result<Option<Item>, StreamError> {
        let Some(name) = args.first() else {
            return Ok(Some(Item::Skip));
        };
        let is = |word: &str| name.eq_ignore_ascii_case(word.as_bytes());
        if is("multi") {
            if self.block.is_some() {
                return Err(StreamError::NestedMulti);
            }
            self.block = Some(Vec::new());
            self.block_start = start;
            return Ok(None);
        }
        if is("exec") {
            return Ok(Some(match self.block.take() {
                Some(items) => Item::Apply(Command::Transaction(Box::new(Transaction { items }))),
                None => Item::Invalid {
                    name: "exec".into(),
                    why: "EXEC without MULTI".into(),
                },
            }));
        }
        if let Some(block) = &mut self.block {
            if block.len() >= MAX_BLOCK {
                return Err(StreamError::BlockTooLong(MAX_BLOCK));
            }
            block.push(match Command::parse(args) {
                Ok(command) => TxnItem::Run(command),
                Err(error) => TxnItem::Answered(Reply::from(error)),
            });
            return Ok(None);
        }
        if is("ping") {
            return Ok(Some(Item::Skip));
        }
        if is("replconf") {
            let sub = |word: &[u8]| args.get(1).is_some_and(|s| s.eq_ignore_ascii_case(word));
            if sub(b"barrier") {
                return Ok(Some(match super::barrier::parse(&args[2..]) {
                    Some((id, involved)) => Item::Barrier { id, involved },
                    None => Item::Invalid {
                        name: "replconf".into(),
                        why: "malformed BARRIER".into(),
                    },
                }));
            }
            return Ok(Some(if sub(b"getack") {
                Item::GetAck
            } else {
                Item::Skip
            }));
        }
        if is("select") {
            let db = args
                .get(1)
                .and_then(|db| std::str::from_utf8(db).ok()?.parse::<i64>().ok());
            return Ok(Some(match db {
                Some(db) => Item::Select(db),
                None => Item::Invalid {
                    name: "select".into(),
                    why: "not a database number".into(),
                },
            }));
        }
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        Ok(Some(match Command::parse(args) {
            Ok(command) => Item::Apply(command),
            Err(error) => Item::Invalid {
                name,
                why: error.to_string(),
            },
        }))
    }
}

/// Which dispatched commands have run, in stream order: the offset acknowledged is the end
/// of the longest prefix of the stream all applied. Bounded: the link stops dispatching
/// while `len() == capacity`.
#[derive(Debug)]
pub struct Applied {
    /// (sequence number, offset after it, done)
    pending: VecDeque<(u64, u64, bool)>,
    /// Offset after the last command of the applied prefix.
    through: u64,
    capacity: usize,
}

impl Applied {
    pub fn new(offset: u64, capacity: usize) -> Applied {
        Applied {
            pending: VecDeque::new(),
            through: offset,
            capacity: capacity.max(1),
        }
    }

    /// The replication offset applied (Redis's `slave_repl_offset`).
    pub fn offset(&self) -> u64 {
        self.through
    }

    pub fn is_full(&self) -> bool {
        self.pending.len() >= self.capacity
    }

    /// Nothing dispatched is still running.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// Command `seq`, ending at offset `end`, was dispatched and its reply is still to come.
    pub fn dispatched(&mut self, seq: u64, end: u64) {
        self.pending.push_back((seq, end, false));
    }

    /// An item that needs no shard (or ran at once) ends at `end`.
    pub fn counted(&mut self, end: u64) {
        if self.pending.is_empty() {
            self.through = end;
        } else {
            self.pending.push_back((u64::MAX, end, true));
        }
    }

    /// Command `seq`'s reply came back: it ran.
    pub fn completed(&mut self, seq: u64) {
        if let Some(entry) = self.pending.iter_mut().find(|entry| entry.0 == seq) {
            entry.2 = true;
        }
        while let Some(&(_, end, true)) = self.pending.front() {
            self.through = end;
            self.pending.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> StreamReader {
        StreamReader::new(100, ParserLimits::default())
    }

    fn all(reader: &mut StreamReader, input: &mut BytesMut) -> Vec<Framed> {
        let mut out = Vec::new();
        while let Some(framed) = reader.next(input).unwrap() {
            out.push(framed);
        }
        out
    }

    #[test]
    fn offsets_count_every_byte() {
        let mut r = reader();
        let select = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n";
        let ping = b"*1\r\n$4\r\nPING\r\n";
        let set = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
        let getack = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";
        let mut input = BytesMut::new();
        for part in [&select[..], ping, set, getack] {
            input.extend_from_slice(part);
        }
        // Half a request waits for the rest.
        input.extend_from_slice(b"*2\r\n$3\r\nDEL");
        let items = all(&mut r, &mut input);
        let kinds: Vec<&Item> = items.iter().map(|f| &f.item).collect();
        assert_eq!(kinds[0], &Item::Select(0));
        assert_eq!(kinds[1], &Item::Skip);
        assert!(matches!(kinds[2], Item::Apply(Command::Set(_))));
        assert_eq!(kinds[3], &Item::GetAck);
        let mut end = 100;
        for (framed, part) in items.iter().zip([&select[..], ping, set, getack]) {
            end += part.len() as u64;
            assert_eq!(framed.end, end);
        }
        assert_eq!(r.offset(), end);
        input.extend_from_slice(b"\r\n$1\r\nk\r\n");
        let del = all(&mut r, &mut input);
        assert_eq!(del.len(), 1);
        assert_eq!(del[0].end, end + 20);
    }

    #[test]
    fn a_multi_block_is_one_transaction_at_its_exec() {
        let mut r = reader();
        let mut input = BytesMut::from(
            &b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$1\r\na\r\n*2\r\n$4\r\nINCR\r\n$1\r\nb\r\n"
                [..],
        );
        assert!(all(&mut r, &mut input).is_empty());
        assert!(r.in_block());
        assert_eq!(r.resume_offset(), 100);
        input.extend_from_slice(b"*1\r\n$4\r\nEXEC\r\n");
        let items = all(&mut r, &mut input);
        let [Framed {
            item: Item::Apply(Command::Transaction(txn)),
            end,
        }] = &items[..]
        else {
            panic!("{items:?}");
        };
        assert_eq!(txn.items.len(), 2);
        assert_eq!(*end, r.offset());
        let mut nested = BytesMut::from(&b"*1\r\n$5\r\nMULTI\r\n*1\r\n$5\r\nMULTI\r\n"[..]);
        assert_eq!(r.next(&mut nested), Err(StreamError::NestedMulti));
    }

    #[test]
    fn unknown_commands_are_reported_not_fatal() {
        let mut r = reader();
        let mut input = BytesMut::from(&b"*1\r\n$7\r\nNOTACMD\r\n*1\r\n$4\r\nPING\r\n"[..]);
        let items = all(&mut r, &mut input);
        assert!(matches!(&items[0].item, Item::Invalid { name, .. } if name == "notacmd"));
        assert_eq!(items[1].item, Item::Skip);
    }

    #[test]
    fn applied_offset_is_the_prefix_that_ran() {
        let mut a = Applied::new(10, 3);
        a.counted(12);
        assert_eq!(a.offset(), 12);
        a.dispatched(1, 20);
        a.dispatched(2, 30);
        a.counted(31);
        assert!(a.is_full());
        a.completed(2);
        assert_eq!(a.offset(), 12);
        a.completed(1);
        assert_eq!(a.offset(), 31);
        assert!(a.is_idle());
    }
}
