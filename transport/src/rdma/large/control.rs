//! The control records of large messages, sans-I/O. They travel in their own SEND messages,
//! marked by [`CONTROL_IMM`] in the immediate data (whose other bits still carry credits), so
//! they never mix with the frame byte stream:
//! - a **descriptor**: the sender registered `len` bytes at `addr` (key `rkey`) for the peer
//!   to RDMA READ; they stand at the current position of the byte stream (the frames'
//!   bytes before it were sent before it, those after it after);
//! - **done**: the receiver has its copy of descriptor `id`; the sender may deregister.

use std::fmt;

/// Immediate-data bit of a message that carries control records instead of stream bytes.
/// Credits (the other bits) never come near it: they are bounded by the window.
pub const CONTROL_IMM: u32 = 1 << 31;

const DESCRIPTOR: u8 = 1;
const DONE: u8 = 2;
/// Tag, id, rkey, len, addr.
pub const DESCRIPTOR_LEN: usize = 1 + 4 + 4 + 4 + 8;
/// Tag, id.
pub const DONE_LEN: usize = 1 + 4;

/// Where the peer may read a large message from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    pub id: u32,
    pub addr: u64,
    pub len: u32,
    pub rkey: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    Descriptor(Descriptor),
    Done { id: u32 },
}

impl Record {
    // Only the unit tests look at it.
    #[cfg(test)]
    pub fn encoded_len(&self) -> usize {
        match self {
            Record::Descriptor(_) => DESCRIPTOR_LEN,
            Record::Done { .. } => DONE_LEN,
        }
    }

    /// Append the record to `out` (little endian).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Record::Descriptor(d) => {
                out.push(DESCRIPTOR);
                out.extend_from_slice(&d.id.to_le_bytes());
                out.extend_from_slice(&d.rkey.to_le_bytes());
                out.extend_from_slice(&d.len.to_le_bytes());
                out.extend_from_slice(&d.addr.to_le_bytes());
            }
            Record::Done { id } => {
                out.push(DONE);
                out.extend_from_slice(&id.to_le_bytes());
            }
        }
    }
}

/// A control message that is not a sequence of whole, known records: the peer is not
/// speaking our protocol (the connection ends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadControl(pub String);

impl fmt::Display for BadControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad large-message control record: {}", self.0)
    }
}

/// Every record of one control message.
pub fn decode(mut buf: &[u8]) -> Result<Vec<Record>, BadControl> {
    let mut records = Vec::new();
    while let Some((&tag, rest)) = buf.split_first() {
        let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let need = match tag {
            DESCRIPTOR => DESCRIPTOR_LEN - 1,
            DONE => DONE_LEN - 1,
            t => return Err(BadControl(format!("unknown tag {t}"))),
        };
        if rest.len() < need {
            return Err(BadControl(format!(
                "record of tag {tag} cut short ({} of {need} bytes)",
                rest.len()
            )));
        }
        records.push(match tag {
            DESCRIPTOR => {
                let d = Descriptor {
                    id: u32_at(rest, 0),
                    rkey: u32_at(rest, 4),
                    len: u32_at(rest, 8),
                    addr: u64::from_le_bytes(rest[12..20].try_into().unwrap()),
                };
                if d.len == 0 {
                    return Err(BadControl("descriptor of 0 bytes".into()));
                }
                Record::Descriptor(d)
            }
            _ => Record::Done {
                id: u32_at(rest, 0),
            },
        });
        buf = &rest[need..];
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_roundtrip_back_to_back() {
        let records = [
            Record::Descriptor(Descriptor {
                id: 7,
                addr: 0xdead_beef_0000_1000,
                len: 1 << 20,
                rkey: 0x1234,
            }),
            Record::Done { id: 3 },
            Record::Done { id: u32::MAX },
        ];
        let mut buf = Vec::new();
        for r in &records {
            r.encode(&mut buf);
        }
        assert_eq!(buf.len(), records.iter().map(Record::encoded_len).sum());
        assert_eq!(decode(&buf).unwrap(), records);
        assert_eq!(decode(&[]).unwrap(), []);
    }

    #[test]
    fn cut_unknown_or_empty_records_are_refused() {
        let mut buf = Vec::new();
        Record::Done { id: 1 }.encode(&mut buf);
        assert!(decode(&buf[..3]).is_err());
        assert!(decode(&[9, 0, 0, 0, 0]).is_err());
        let mut empty = Vec::new();
        Record::Descriptor(Descriptor {
            id: 1,
            addr: 1,
            len: 0,
            rkey: 1,
        })
        .encode(&mut empty);
        assert!(decode(&empty).is_err());
    }
}
