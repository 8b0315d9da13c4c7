//! What a replica reports about its link: ROLE's replica form and INFO replication's
//! replica fields, from a [`MasterLinkInfo`] the glue fills in.

use std::fmt::Write;

use bytes::Bytes;

use crate::reply::Reply;

/// Where the link to the master stands (Redis's `repl_state`, as ROLE names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MasterLinkState {
    /// Waiting to connect (after a failure, or just configured).
    #[default]
    Connect,
    Connecting,
    /// PING .. PSYNC.
    Handshake,
    /// Receiving or loading the snapshot.
    Sync,
    Connected,
}

impl MasterLinkState {
    pub fn name(self) -> &'static str {
        match self {
            MasterLinkState::Connect => "connect",
            MasterLinkState::Connecting => "connecting",
            MasterLinkState::Handshake => "handshake",
            MasterLinkState::Sync => "sync",
            MasterLinkState::Connected => "connected",
        }
    }

    pub fn as_u8(self) -> u8 {
        self as u8
    }

    pub fn from_u8(value: u8) -> MasterLinkState {
        match value {
            1 => MasterLinkState::Connecting,
            2 => MasterLinkState::Handshake,
            3 => MasterLinkState::Sync,
            4 => MasterLinkState::Connected,
            _ => MasterLinkState::Connect,
        }
    }
}

/// A replica's link, as INFO and ROLE show it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MasterLinkInfo {
    pub master_host: String,
    pub master_port: u16,
    pub state: MasterLinkState,
    /// Seconds since the master last sent anything (`None`: no link).
    pub last_io_seconds_ago: Option<u64>,
    /// Seconds the link has been down (`None`: never up yet).
    pub down_since_seconds: Option<u64>,
    /// Bytes of the master's stream read, and applied.
    pub read_offset: u64,
    pub applied_offset: u64,
    pub priority: i64,
    pub read_only: bool,
    pub announced: bool,
    /// The master's replication id (this node's own while it replicates).
    pub replid: String,
    /// How the link reaches the master (`repl-transport`: `tcp` or `rdma`).
    pub transport: &'static str,
    /// Attempts of the link that failed since this REPLICAOF (connect, handshake, sync or
    /// stream), and the last one's reason (empty: none).
    pub failures: u64,
    pub last_error: String,
    /// On shard links: each shard's applied offset (`read_offset` and `applied_offset`
    /// are then their sums, and `state` is connected only when every link is).
    pub shard_offsets: Option<Vec<u64>>,
}

impl MasterLinkInfo {
    /// ROLE: `slave`, the master's host and port, the link's state and the offset applied
    /// (-1 before the first sync).
    pub fn role_reply(&self) -> Reply {
        let offset = if self.replid.is_empty() {
            -1
        } else {
            self.applied_offset as i64
        };
        Reply::Array(vec![
            Reply::Bulk(Bytes::from_static(b"slave")),
            Reply::Bulk(Bytes::from(self.master_host.clone())),
            Reply::Integer(i64::from(self.master_port)),
            Reply::Bulk(Bytes::from_static(self.state.name().as_bytes())),
            Reply::Integer(offset),
        ])
    }

    /// INFO replication's replica fields, from `role` to `replica_announced` (the master
    /// fields that follow are the caller's).
    pub fn write_info(&self, out: &mut String) {
        let up = self.state == MasterLinkState::Connected;
        let _ = write!(
            out,
            "role:slave\r\n\
             master_host:{}\r\n\
             master_port:{}\r\n\
             master_link_status:{}\r\n\
             master_last_io_seconds_ago:{}\r\n\
             master_sync_in_progress:{}\r\n\
             slave_read_repl_offset:{}\r\n\
             slave_repl_offset:{}\r\n",
            self.master_host,
            self.master_port,
            if up { "up" } else { "down" },
            self.last_io_seconds_ago.map_or(-1, |s| s as i64),
            u8::from(self.state == MasterLinkState::Sync),
            self.read_offset,
            self.applied_offset,
        );
        if !up {
            let _ = write!(
                out,
                "master_link_down_since_seconds:{}\r\n",
                self.down_since_seconds.map_or(-1, |s| s as i64)
            );
        }
        let _ = write!(
            out,
            "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:{}\r\n",
            self.priority,
            u8::from(self.read_only),
            u8::from(self.announced),
        );
        // corewire's own, after Redis's: an INFO reader sees why a link is down.
        let _ = write!(
            out,
            "master_link_transport:{}\r\nmaster_link_failures:{}\r\n",
            self.transport, self.failures
        );
        if !self.last_error.is_empty() {
            let _ = write!(
                out,
                "master_link_last_error:{}\r\n",
                info_value(&self.last_error)
            );
        }
        if let Some(offsets) = &self.shard_offsets {
            // A comma list would read as `key=value` pairs: shards are `:`-separated.
            let parts: Vec<String> = offsets.iter().map(u64::to_string).collect();
            let _ = write!(
                out,
                "slave_shard_links:{}\r\nslave_shard_repl_offsets:{}\r\n",
                offsets.len(),
                parts.join(":")
            );
        }
    }
}

/// `text` as one INFO value: no line breaks, and no `,` (readers such as redis-py take a
/// value with `,` and `=` for a list of `key=value` pairs).
fn info_value(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\r' | '\n' => ' ',
            ',' => ';',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_and_role() {
        let mut info = MasterLinkInfo {
            master_host: "127.0.0.1".into(),
            master_port: 6379,
            state: MasterLinkState::Connected,
            last_io_seconds_ago: Some(1),
            read_offset: 120,
            applied_offset: 100,
            priority: 100,
            read_only: true,
            announced: true,
            replid: "a".repeat(40),
            ..MasterLinkInfo::default()
        };
        let mut out = String::new();
        info.write_info(&mut out);
        assert!(out.starts_with("role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:6379\r\n"));
        assert!(out.contains("master_link_status:up\r\n"));
        assert!(out.contains("slave_read_repl_offset:120\r\nslave_repl_offset:100\r\n"));
        assert!(!out.contains("down_since"));
        assert_eq!(
            info.role_reply(),
            Reply::Array(vec![
                Reply::Bulk("slave".into()),
                Reply::Bulk("127.0.0.1".into()),
                Reply::Integer(6379),
                Reply::Bulk("connected".into()),
                Reply::Integer(100),
            ])
        );
        assert!(!out.contains("master_link_last_error"));
        info.state = MasterLinkState::Connect;
        info.replid.clear();
        info.transport = "rdma";
        info.failures = 3;
        info.last_error = "no RDMA device, none found\r\nat all".into();
        let mut out = String::new();
        info.write_info(&mut out);
        assert!(out.contains("master_link_status:down\r\n"));
        assert!(out.contains("master_link_transport:rdma\r\nmaster_link_failures:3\r\n"));
        assert!(out.contains("master_link_last_error:no RDMA device; none found  at all\r\n"));
        assert!(out.contains("master_link_down_since_seconds:-1\r\n"));
        assert!(!out.contains("slave_shard_links"));
        info.shard_offsets = Some(vec![120, 0, 33, 7]);
        let mut out = String::new();
        info.write_info(&mut out);
        assert!(out.contains("slave_shard_links:4\r\nslave_shard_repl_offsets:120:0:33:7\r\n"));
        assert!(
            matches!(&info.role_reply(), Reply::Array(items) if items[4] == Reply::Integer(-1))
        );
        for state in [
            MasterLinkState::Connect,
            MasterLinkState::Connecting,
            MasterLinkState::Handshake,
            MasterLinkState::Sync,
            MasterLinkState::Connected,
        ] {
            assert_eq!(MasterLinkState::from_u8(state.as_u8()), state);
        }
    }
}
