//! CLUSTER NODES, SLOTS, SHARDS and INFO in Redis 7.0's formats (checked against
//! redis-server 7.0 with `redis-cli --cluster create`): the tools that read them
//! (`redis-cli --cluster`, `redis-benchmark --cluster`, cluster clients) parse them exactly.

use std::fmt::Write;

use bytes::Bytes;

use super::node::Node;
use super::slots::{format_range, ranges};
use super::topology::Topology;
use super::view::NodeIndex;
use crate::reply::Reply;

/// One CLUSTER NODES line (without the newline); `nodes.conf` uses the same lines.
pub fn node_line(topology: &Topology, index: NodeIndex, node: &Node) -> String {
    let myself = index == topology.myself_index();
    let mut flags = Vec::new();
    if myself {
        flags.push("myself");
    }
    flags.push(if node.is_replica() { "slave" } else { "master" });
    if node.pfail {
        flags.push("fail?");
    }
    if node.fail {
        flags.push("fail");
    }
    if node.addr.ip.is_empty() && !myself {
        flags.push("noaddr");
    }
    let link = if myself || node.link_up {
        "connected"
    } else {
        "disconnected"
    };
    let primary = node.primary.map_or("-".to_owned(), |id| id.to_string());
    let epoch = node_epoch(topology, node);
    let mut line = format!(
        "{} {}:{}@{} {} {} {} {} {} {}",
        node.id,
        node.addr.ip,
        node.addr.port,
        node.addr.cport,
        flags.join(","),
        primary,
        node.ping_sent,
        node.pong_received,
        epoch,
        link
    );
    for range in ranges(topology.slots_of(index).iter()) {
        line.push(' ');
        line.push_str(&format_range(range));
    }
    if myself {
        for (slot, to) in topology.migrating() {
            if let Some(to) = topology.node(to) {
                let _ = write!(line, " [{slot}->-{}]", to.id);
            }
        }
        for (slot, from) in topology.importing() {
            if let Some(from) = topology.node(from) {
                let _ = write!(line, " [{slot}-<-{}]", from.id);
            }
        }
    }
    line
}

/// A node's config epoch as Redis shows it: a replica's is its primary's.
fn node_epoch(topology: &Topology, node: &Node) -> u64 {
    node.primary
        .and_then(|id| topology.find(&id))
        .and_then(|i| topology.node(i))
        .map_or(node.config_epoch, |p| p.config_epoch)
}

/// CLUSTER NODES: one line per node, each ending in a newline.
pub fn nodes(topology: &Topology) -> Reply {
    let mut text = String::new();
    for (index, node) in topology.nodes() {
        text.push_str(&node_line(topology, index, node));
        text.push('\n');
    }
    Reply::Bulk(Bytes::from(text))
}

/// `[ip, port, id, {}]`: a node in CLUSTER SLOTS (the last map holds hostnames, none here).
fn slots_node(node: &Node) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(node.addr.ip.clone())),
        Reply::Integer(i64::from(node.addr.port)),
        Reply::Bulk(Bytes::copy_from_slice(node.id.as_bytes())),
        Reply::Array(Vec::new()),
    ])
}

/// CLUSTER REPLICAS: the CLUSTER NODES line of each replica of `primary`.
pub fn replicas(topology: &Topology, primary: NodeIndex) -> Reply {
    Reply::Array(
        topology
            .replicas_of(primary)
            .into_iter()
            .filter_map(|i| {
                Some(Reply::Bulk(Bytes::from(node_line(
                    topology,
                    i,
                    topology.node(i)?,
                ))))
            })
            .collect(),
    )
}

/// A node's replication offset: ours as the glue reported it, others' as announced.
fn offset_of(topology: &Topology, index: NodeIndex, node: &Node) -> u64 {
    if index == topology.myself_index() {
        topology.my_offset()
    } else {
        node.repl_offset
    }
}

/// CLUSTER SLOTS: `[start, end, owner, replicas...]` per run of slots with one owner, in
/// slot order; a replica is listed once it is not failing and has data (offset not 0).
pub fn slots(topology: &Topology) -> Reply {
    let mut out = Vec::new();
    let mut slot = 0u32;
    while slot < 16384 {
        let Some(owner) = topology.owner(slot as u16) else {
            slot += 1;
            continue;
        };
        let start = slot;
        while slot + 1 < 16384 && topology.owner((slot + 1) as u16) == Some(owner) {
            slot += 1;
        }
        if let Some(node) = topology.node(owner) {
            let mut entry = vec![
                Reply::Integer(i64::from(start)),
                Reply::Integer(i64::from(slot)),
                slots_node(node),
            ];
            for replica in topology.replicas_of(owner) {
                let Some(r) = topology.node(replica) else {
                    continue;
                };
                if !r.fail && offset_of(topology, replica, r) != 0 {
                    entry.push(slots_node(r));
                }
            }
            out.push(Reply::Array(entry));
        }
        slot += 1;
    }
    Reply::Array(out)
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(Bytes::from(text.to_owned()))
}

/// One node of a CLUSTER SHARDS shard.
fn shard_node(topology: &Topology, index: NodeIndex, node: &Node) -> Reply {
    let offset = offset_of(topology, index, node);
    let health = if node.fail {
        "fail"
    } else if node.is_replica() && offset == 0 {
        "loading"
    } else {
        "online"
    };
    Reply::Array(vec![
        bulk("id"),
        Reply::Bulk(Bytes::copy_from_slice(node.id.as_bytes())),
        bulk("port"),
        Reply::Integer(i64::from(node.addr.port)),
        bulk("ip"),
        bulk(&node.addr.ip),
        bulk("endpoint"),
        bulk(&node.addr.ip),
        bulk("role"),
        bulk(if node.is_replica() {
            "replica"
        } else {
            "master"
        }),
        bulk("replication-offset"),
        Reply::Integer(i64::try_from(offset).unwrap_or(i64::MAX)),
        bulk("health"),
        bulk(health),
    ])
}

/// CLUSTER SHARDS: one shard per primary, with its slot ranges flattened, the primary
/// first and then its replicas.
pub fn shards(topology: &Topology) -> Reply {
    let shards = topology
        .nodes()
        .filter(|(_, node)| !node.is_replica())
        .map(|(index, node)| {
            let slots = ranges(topology.slots_of(index).iter())
                .into_iter()
                .flat_map(|(start, end)| {
                    [
                        Reply::Integer(i64::from(start)),
                        Reply::Integer(i64::from(end)),
                    ]
                })
                .collect();
            let mut members = vec![shard_node(topology, index, node)];
            for replica in topology.replicas_of(index) {
                if let Some(r) = topology.node(replica) {
                    members.push(shard_node(topology, replica, r));
                }
            }
            Reply::Array(vec![
                bulk("slots"),
                Reply::Array(slots),
                bulk("nodes"),
                Reply::Array(members),
            ])
        })
        .collect();
    Reply::Array(shards)
}

/// CLUSTER INFO.
pub fn info(topology: &Topology) -> Reply {
    let (mut assigned, mut pfail, mut fail) = (0, 0, 0);
    for slot in 0..16384u16 {
        if let Some(owner) = topology.owner(slot) {
            assigned += 1;
            match topology.node(owner) {
                Some(n) if n.fail => fail += 1,
                Some(n) if n.pfail => pfail += 1,
                _ => {}
            }
        }
    }
    let mut text = format!(
        "cluster_state:{}\r\n\
         cluster_slots_assigned:{assigned}\r\n\
         cluster_slots_ok:{}\r\n\
         cluster_slots_pfail:{pfail}\r\n\
         cluster_slots_fail:{fail}\r\n\
         cluster_known_nodes:{}\r\n\
         cluster_size:{}\r\n\
         cluster_current_epoch:{}\r\n\
         cluster_my_epoch:{}\r\n",
        if topology.is_ok() { "ok" } else { "fail" },
        assigned - pfail - fail,
        topology.nodes().count(),
        topology.size(),
        topology.current_epoch(),
        node_epoch(topology, topology.myself()),
    );
    let stats = topology.stats.by_kind();
    let mut total = 0;
    for (name, sent, _) in stats {
        if sent > 0 {
            total += sent;
            let _ = write!(text, "cluster_stats_messages_{name}_sent:{sent}\r\n");
        }
    }
    let _ = write!(text, "cluster_stats_messages_sent:{total}\r\n");
    let mut total = 0;
    for (name, _, received) in stats {
        if received > 0 {
            total += received;
            let _ = write!(
                text,
                "cluster_stats_messages_{name}_received:{received}\r\n"
            );
        }
    }
    let _ = write!(
        text,
        "cluster_stats_messages_received:{total}\r\n\
         total_cluster_links_buffer_limit_exceeded:0\r\n"
    );
    Reply::Bulk(Bytes::from(text))
}
