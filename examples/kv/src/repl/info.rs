//! What INFO's replication section and ROLE show of a master, from a [`ReplInfo`] snapshot
//! the glue keeps up to date.

use std::fmt::Write;

use bytes::Bytes;

use super::{Identity, NO_REPLID};
use crate::reply::Reply;

/// A replica link's state, as INFO names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Waiting for the snapshot to begin.
    WaitBgsave,
    /// Receiving the RDB.
    SendBulk,
    Online,
}

impl LinkState {
    pub fn name(self) -> &'static str {
        match self {
            LinkState::WaitBgsave => "wait_bgsave",
            LinkState::SendBulk => "send_bulk",
            LinkState::Online => "online",
        }
    }
}

/// One replica as INFO and ROLE show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaInfo {
    pub ip: String,
    pub port: u16,
    pub state: LinkState,
    /// The offset it last acknowledged.
    pub ack_offset: u64,
    /// When (Unix ms) it last acknowledged.
    pub ack_ms: u64,
}

/// The master's replication state, snapshotted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplInfo {
    pub identity: Identity,
    pub replicas: Vec<ReplicaInfo>,
    /// `(first byte offset, histlen)` once there is a backlog.
    pub backlog: Option<(u64, u64)>,
    pub backlog_size: u64,
    /// `min-replicas-to-write`, and the good replicas by `min-replicas-max-lag`.
    pub min_replicas_to_write: u64,
    pub good_replicas: u64,
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// When (Unix ms) the snapshot was taken: the replicas' lag counts to it.
    pub now_ms: u64,
}

impl Default for ReplInfo {
    fn default() -> Self {
        ReplInfo {
            identity: Identity::new(NO_REPLID.to_owned()),
            replicas: Vec::new(),
            backlog: None,
            backlog_size: super::DEFAULT_BACKLOG_SIZE as u64,
            min_replicas_to_write: 0,
            good_replicas: 0,
            sync_full: 0,
            sync_partial_ok: 0,
            sync_partial_err: 0,
            now_ms: 0,
        }
    }
}

impl ReplInfo {
    /// INFO's `# Replication` section of a master.
    pub fn render_master(&self, out: &mut String) {
        let now_ms = self.now_ms;
        let id = &self.identity;
        let _ = write!(
            out,
            "# Replication\r\nrole:master\r\nconnected_slaves:{}\r\n",
            self.replicas.len()
        );
        if self.min_replicas_to_write > 0 {
            let _ = write!(out, "min_slaves_good_slaves:{}\r\n", self.good_replicas);
        }
        for (i, replica) in self.replicas.iter().enumerate() {
            let _ = write!(
                out,
                "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
                replica.ip,
                replica.port,
                replica.state.name(),
                replica.ack_offset,
                now_ms.saturating_sub(replica.ack_ms) / 1000
            );
        }
        let (first, histlen) = self.backlog.unwrap_or((0, 0));
        let _ = write!(
            out,
            "master_failover_state:no-failover\r\n\
             master_replid:{}\r\n\
             master_replid2:{}\r\n\
             master_repl_offset:{}\r\n\
             second_repl_offset:{}\r\n\
             repl_backlog_active:{}\r\n\
             repl_backlog_size:{}\r\n\
             repl_backlog_first_byte_offset:{first}\r\n\
             repl_backlog_histlen:{histlen}\r\n",
            id.replid,
            id.replid2,
            id.master_repl_offset,
            id.second_repl_offset,
            u8::from(self.backlog.is_some()),
            self.backlog_size,
        );
    }

    /// ROLE's master form: `master`, the offset, and `[ip, port, acked offset]` of each
    /// online replica.
    pub fn role_reply(&self) -> Reply {
        let replicas = self
            .replicas
            .iter()
            .filter(|r| r.state == LinkState::Online)
            .map(|r| {
                Reply::Array(vec![
                    Reply::Bulk(Bytes::from(r.ip.clone())),
                    Reply::Bulk(Bytes::from(r.port.to_string())),
                    Reply::Bulk(Bytes::from(r.ack_offset.to_string())),
                ])
            })
            .collect();
        Reply::Array(vec![
            Reply::Bulk(Bytes::from_static(b"master")),
            Reply::Integer(self.identity.master_repl_offset as i64),
            Reply::Array(replicas),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_redis_fields() {
        let mut info = ReplInfo::default();
        info.identity.master_repl_offset = 120;
        info.backlog = Some((1, 120));
        info.replicas.push(ReplicaInfo {
            ip: "127.0.0.1".into(),
            port: 6380,
            state: LinkState::Online,
            ack_offset: 100,
            ack_ms: 9_000,
        });
        info.now_ms = 10_500;
        let mut out = String::new();
        info.render_master(&mut out);
        assert!(out.starts_with("# Replication\r\nrole:master\r\nconnected_slaves:1\r\n"));
        assert!(out.contains("slave0:ip=127.0.0.1,port=6380,state=online,offset=100,lag=1\r\n"));
        assert!(out.contains("master_repl_offset:120\r\n"));
        assert!(out.contains("repl_backlog_active:1\r\n"));
        assert!(!out.contains("min_slaves_good_slaves"));
        assert_eq!(
            info.role_reply(),
            Reply::Array(vec![
                Reply::Bulk(Bytes::from("master")),
                Reply::Integer(120),
                Reply::Array(vec![Reply::Array(vec![
                    Reply::Bulk(Bytes::from("127.0.0.1")),
                    Reply::Bulk(Bytes::from("6380")),
                    Reply::Bulk(Bytes::from("100")),
                ])]),
            ])
        );
    }
}
