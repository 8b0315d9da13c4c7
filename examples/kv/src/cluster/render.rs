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
    flags.push("master");
    if node.pfail {
        flags.push("fail?");
    }
    if node.addr.ip.is_empty() && !myself {
        flags.push("noaddr");
    }
    let link = if myself || node.link_up {
        "connected"
    } else {
        "disconnected"
    };
    let mut line = format!(
        "{} {}:{}@{} {} - {} {} {} {}",
        node.id,
        node.addr.ip,
        node.addr.port,
        node.addr.cport,
        flags.join(","),
        node.ping_sent,
        node.pong_received,
        node.config_epoch,
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

/// CLUSTER SLOTS: `[start, end, owner]` per run of slots with one owner, in slot order.
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
            out.push(Reply::Array(vec![
                Reply::Integer(i64::from(start)),
                Reply::Integer(i64::from(slot)),
                slots_node(node),
            ]));
        }
        slot += 1;
    }
    Reply::Array(out)
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(Bytes::from(text.to_owned()))
}

/// CLUSTER SHARDS: one shard per node (no replicas), with its slot ranges flattened.
pub fn shards(topology: &Topology) -> Reply {
    let shards = topology
        .nodes()
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
            let details = Reply::Array(vec![
                bulk("id"),
                Reply::Bulk(Bytes::copy_from_slice(node.id.as_bytes())),
                bulk("port"),
                Reply::Integer(i64::from(node.addr.port)),
                bulk("ip"),
                bulk(&node.addr.ip),
                bulk("endpoint"),
                bulk(&node.addr.ip),
                bulk("role"),
                bulk("master"),
                bulk("replication-offset"),
                Reply::Integer(0),
                bulk("health"),
                bulk("online"),
            ]);
            Reply::Array(vec![
                bulk("slots"),
                Reply::Array(slots),
                bulk("nodes"),
                Reply::Array(vec![details]),
            ])
        })
        .collect();
    Reply::Array(shards)
}

/// CLUSTER INFO.
pub fn info(topology: &Topology) -> Reply {
    let mut assigned = 0;
    let mut pfail = 0;
    let mut sizes = std::collections::BTreeSet::new();
    for slot in 0..16384u16 {
        if let Some(owner) = topology.owner(slot) {
            assigned += 1;
            sizes.insert(owner);
            if topology.node(owner).is_some_and(|n| n.pfail) {
                pfail += 1;
            }
        }
    }
    let mut text = format!(
        "cluster_state:{}\r\n\
         cluster_slots_assigned:{assigned}\r\n\
         cluster_slots_ok:{}\r\n\
         cluster_slots_pfail:{pfail}\r\n\
         cluster_slots_fail:0\r\n\
         cluster_known_nodes:{}\r\n\
         cluster_size:{}\r\n\
         cluster_current_epoch:{}\r\n\
         cluster_my_epoch:{}\r\n",
        if topology.is_ok() { "ok" } else { "fail" },
        assigned - pfail,
        topology.nodes().count(),
        sizes.len(),
        topology.current_epoch(),
        topology.myself().config_epoch,
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
