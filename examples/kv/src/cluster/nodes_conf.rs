//! The per-node configuration file, in Redis's `nodes.conf` format: one CLUSTER NODES line
//! per node (this node's line marked `myself`, with its open slots as `[slot->-id]` and
//! `[slot-<-id]`), then `vars currentEpoch N lastVoteEpoch N`. A node restarted with it
//! keeps its id, its slots and its view of the others.

use std::collections::HashMap;

use super::node::{Node, NodeAddr, NodeId};
use super::render::node_line;
use super::slots::parse_slot;
use super::topology::Topology;
use super::view::NodeIndex;

/// The file's text for `topology`.
pub fn render(topology: &Topology) -> String {
    let mut text = String::new();
    for (index, node) in topology.nodes() {
        text.push_str(&node_line(topology, index, node));
        text.push('\n');
    }
    text.push_str(&format!(
        "vars currentEpoch {} lastVoteEpoch {}\n",
        topology.current_epoch(),
        topology.last_vote_epoch()
    ));
    text
}

/// Slot fields of a line, kept until every node is known (they may name later lines).
enum SlotField {
    Range(u16, u16),
    Migrating(u16, NodeId),
    Importing(u16, NodeId),
}

struct ParsedLine {
    node: Node,
    myself: bool,
    slots: Vec<SlotField>,
}

/// Reads a saved configuration. Errors name the line: a damaged file stops the server
/// rather than letting it start with a cluster configuration it does not have.
pub fn parse(text: &str, node_timeout_ms: u64) -> Result<Topology, String> {
    let mut lines = Vec::new();
    let mut epochs = (0, 0);
    for (number, line) in text.lines().enumerate() {
        let number = number + 1;
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.first() {
            None => continue,
            Some(&"vars") => {
                epochs = parse_vars(&fields[1..]).ok_or(format!("line {number}: bad vars"))?
            }
            Some(_) => lines.push(parse_line(&fields).map_err(|e| format!("line {number}: {e}"))?),
        }
    }
    let mut mine = lines.iter().filter(|l| l.myself);
    let me = mine.next().ok_or("no line is marked myself")?;
    if mine.next().is_some() {
        return Err("two lines are marked myself".into());
    }
    let mut topology = Topology::new(me.node.id, me.node.addr.clone(), node_timeout_ms);
    let mut index: HashMap<NodeId, NodeIndex> = HashMap::new();
    for line in &lines {
        if index.contains_key(&line.node.id) {
            return Err(format!("node {} appears twice", line.node.id));
        }
        let i = topology.restore_node(line.node.clone(), line.myself);
        index.insert(line.node.id, i);
    }
    let find = |id: &NodeId| {
        index
            .get(id)
            .copied()
            .ok_or_else(|| format!("an open slot names unknown node {id}"))
    };
    for line in &lines {
        let owner = index[&line.node.id];
        for field in &line.slots {
            match field {
                SlotField::Range(start, end) => {
                    for slot in *start..=*end {
                        topology.restore_owner(slot, owner);
                    }
                }
                SlotField::Migrating(slot, to) => {
                    topology.restore_open_slot(*slot, find(to)?, true)
                }
                SlotField::Importing(slot, from) => {
                    topology.restore_open_slot(*slot, find(from)?, false)
                }
            }
        }
    }
    topology.restore_epochs(epochs.0, epochs.1);
    Ok(topology)
}

fn parse_vars(fields: &[&str]) -> Option<(u64, u64)> {
    let mut current = None;
    let mut last_vote = 0;
    for pair in fields.chunks(2) {
        let value: u64 = pair.get(1)?.parse().ok()?;
        match pair[0] {
            "currentEpoch" => current = Some(value),
            "lastVoteEpoch" => last_vote = value,
            _ => {}
        }
    }
    Some((current?, last_vote))
}

fn parse_line(fields: &[&str]) -> Result<ParsedLine, String> {
    if fields.len() < 8 {
        return Err("fewer than 8 fields".into());
    }
    let id = NodeId::parse(fields[0].as_bytes()).ok_or("bad node id")?;
    let addr = parse_addr(fields[1]).ok_or("bad address")?;
    let flags: Vec<&str> = fields[2].split(',').collect();
    let number = |field: &str| {
        field
            .parse::<u64>()
            .map_err(|_| format!("bad number {field:?}"))
    };
    let mut node = Node::new(id, addr);
    node.config_epoch = number(fields[6])?;
    if flags.contains(&"slave") {
        let primary =
            NodeId::parse(fields[3].as_bytes()).ok_or("a replica without a primary id")?;
        node.primary = Some(primary);
    }
    // Kept across a restart as Redis keeps them; the node's answers clear them.
    node.pfail = flags.contains(&"fail?");
    node.fail = flags.contains(&"fail");
    let slots = fields[8..]
        .iter()
        .map(|field| parse_slot_field(field).ok_or_else(|| format!("bad slot field {field:?}")))
        .collect::<Result<_, _>>()?;
    Ok(ParsedLine {
        node,
        myself: flags.contains(&"myself"),
        slots,
    })
}

/// `ip:port@cport`, optionally followed by `,hostname` (ignored).
fn parse_addr(field: &str) -> Option<NodeAddr> {
    let field = field.split(',').next()?;
    let (ip_port, cport) = field.split_once('@')?;
    let (ip, port) = ip_port.rsplit_once(':')?;
    Some(NodeAddr {
        ip: ip.to_owned(),
        port: port.parse().ok()?,
        cport: cport.parse().ok()?,
    })
}

fn parse_slot_field(field: &str) -> Option<SlotField> {
    if let Some(open) = field.strip_prefix('[').and_then(|f| f.strip_suffix(']')) {
        if let Some((slot, id)) = open.split_once("->-") {
            return Some(SlotField::Migrating(
                parse_slot(slot.as_bytes())?,
                NodeId::parse(id.as_bytes())?,
            ));
        }
        let (slot, id) = open.split_once("-<-")?;
        return Some(SlotField::Importing(
            parse_slot(slot.as_bytes())?,
            NodeId::parse(id.as_bytes())?,
        ));
    }
    let (start, end) = field.split_once('-').unwrap_or((field, field));
    let (start, end) = (parse_slot(start.as_bytes())?, parse_slot(end.as_bytes())?);
    (start <= end).then_some(SlotField::Range(start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file as redis-server 7.0.15 wrote it (`redis-cli --cluster create` of 3 nodes).
    const REDIS_7_0: &str = "\
f4285d5bf6518cf44090daaea1abc04d7fdfecab 127.0.0.1:7003@17003 master - 0 1796233111143 3 connected 10923-16383
6901328cadf6948927538b621639726f44673c64 127.0.0.1:7002@17002 master - 0 1796233110423 2 connected 5461-10922
816970139ac0151a2a25df8bed27555b83622d48 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
vars currentEpoch 3 lastVoteEpoch 0
";

    #[test]
    fn reads_what_redis_writes() {
        let t = parse(REDIS_7_0, 15000).unwrap();
        assert_eq!(
            t.myself().id.as_str(),
            "816970139ac0151a2a25df8bed27555b83622d48"
        );
        assert_eq!(t.myself().addr.port, 7001);
        assert_eq!(t.myself().config_epoch, 1);
        assert_eq!(t.current_epoch(), 3);
        assert_eq!(t.nodes().count(), 3);
        assert_eq!(t.owner(0), Some(t.myself_index()));
        assert_eq!(t.owner(5460), Some(t.myself_index()));
        let other = t.owner(16383).and_then(|i| t.node(i)).unwrap();
        assert_eq!(other.addr.cport, 17003);
        assert!(t.is_ok());
    }

    #[test]
    fn round_trips_with_open_slots() {
        let mut t = parse(REDIS_7_0, 15000).unwrap();
        t.set_migrating(7, b"f4285d5bf6518cf44090daaea1abc04d7fdfecab")
            .unwrap();
        t.set_importing(6000, b"6901328cadf6948927538b621639726f44673c64")
            .unwrap();
        let text = render(&t);
        assert!(text.contains(" [7->-f4285d5bf6518cf44090daaea1abc04d7fdfecab]"));
        assert!(text.contains(" [6000-<-6901328cadf6948927538b621639726f44673c64]"));
        let back = parse(&text, 15000).unwrap();
        assert_eq!(render(&back), text);
        assert_eq!(back.migrating().collect::<Vec<_>>().len(), 1);
        assert_eq!(back.importing().collect::<Vec<_>>().len(), 1);
    }

    /// What redis-server 7.0.15 wrote on a replica (`--cluster-replicas 1`), its primary
    /// failing.
    const REDIS_7_0_REPLICA: &str = "\
a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 127.0.0.1:7004@17004 myself,slave 816970139ac0151a2a25df8bed27555b83622d48 0 0 1 connected
816970139ac0151a2a25df8bed27555b83622d48 127.0.0.1:7001@17001 master,fail - 0 0 1 disconnected 0-16383
vars currentEpoch 3 lastVoteEpoch 2
";

    #[test]
    fn reads_replicas_and_failure_flags() {
        let t = parse(REDIS_7_0_REPLICA, 15000).unwrap();
        let primary = t.owner(0).unwrap();
        assert_eq!(t.my_primary(), Some(primary));
        assert!(t.node(primary).unwrap().fail);
        assert_eq!(t.last_vote_epoch(), 2);
        assert_eq!(t.replicas_of(primary), vec![t.myself_index()]);
        // The primary is failing and full coverage is required.
        assert!(!t.is_ok());
        assert_eq!(render(&t), REDIS_7_0_REPLICA);
    }

    #[test]
    fn damage_is_reported_with_its_line() {
        let err = |text: &str| parse(text, 15000).unwrap_err();
        assert_eq!(err(""), "no line is marked myself");
        assert!(err("nonsense here\n").starts_with("line 1:"));
        let bad_slot = REDIS_7_0.replace("0-5460", "0-99999");
        assert!(err(&bad_slot).starts_with("line 3: bad slot field"));
        let dangling = REDIS_7_0.replace(
            "0-5460",
            "0-5460 [5->-0000000000000000000000000000000000000000]",
        );
        assert!(err(&dangling).contains("unknown node"));
    }
}
