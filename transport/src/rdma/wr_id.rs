//! Work-request ids: which connection, which kind of work, which buffer. The connection part
//! carries a generation so a completion of a connection that is gone (flushed after its queue
//! pair was destroyed) never reaches a newer connection that reused its slot.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrKind {
    Recv,
    Send,
    /// A pure credit acknowledgement (no buffer).
    Ack,
    /// A receive of the shard's shared receive queue (its connection is found by queue pair
    /// number).
    SharedRecv,
    /// An RDMA READ of a large message (`buffer` is its id).
    Read,
    /// A keepalive probe (a zero-byte RDMA WRITE, no buffer).
    Keepalive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrId {
    pub conn_slot: u32,
    pub generation: u16,
    pub kind: WrKind,
    /// Buffer index in the shard's pool (0 for acks).
    pub buffer: u32,
}

impl WrId {
    pub fn encode(self) -> u64 {
        let kind = match self.kind {
            WrKind::Recv => 0u64,
            WrKind::Send => 1,
            WrKind::Ack => 2,
            WrKind::SharedRecv => 3,
            WrKind::Read => 4,
            WrKind::Keepalive => 5,
        };
        (u64::from(self.conn_slot & 0xf_ffff) << 44)
            | (u64::from(self.generation) << 28)
            | (kind << 24)
            | u64::from(self.buffer & 0xff_ffff)
    }

    pub fn decode(raw: u64) -> Option<WrId> {
        let kind = match (raw >> 24) & 0xf {
            0 => WrKind::Recv,
            1 => WrKind::Send,
            2 => WrKind::Ack,
            3 => WrKind::SharedRecv,
            4 => WrKind::Read,
            5 => WrKind::Keepalive,
            _ => return None,
        };
        Some(WrId {
            conn_slot: (raw >> 44) as u32,
            generation: ((raw >> 28) & 0xffff) as u16,
            kind,
            buffer: (raw & 0xff_ffff) as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        for kind in [
            WrKind::Recv,
            WrKind::Send,
            WrKind::Ack,
            WrKind::SharedRecv,
            WrKind::Read,
            WrKind::Keepalive,
        ] {
            let id = WrId {
                conn_slot: 0xf_fff0,
                generation: 0xbeef,
                kind,
                buffer: 0xab_cdef,
            };
            assert_eq!(WrId::decode(id.encode()), Some(id));
        }
        assert_eq!(WrId::decode(0xf << 24), None);
    }
}
