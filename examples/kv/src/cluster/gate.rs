//! A connection's side of cluster mode: the ASKING and READONLY flags and the redirection
//! check every request passes before it is parsed.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;

use super::redirect;
use super::view::SlotMap;
use crate::command::{self, CommandError};
use crate::reply::Reply;

/// The routing snapshot of one shard, shared by its connections and replaced (never
/// mutated) when the configuration changes.
pub type SharedMap = Rc<RefCell<Arc<SlotMap>>>;

#[derive(Debug)]
pub struct ClusterGate {
    map: SharedMap,
    asking: bool,
    readonly: bool,
}

impl ClusterGate {
    pub fn new(map: SharedMap) -> ClusterGate {
        ClusterGate {
            map,
            asking: false,
            readonly: false,
        }
    }

    /// Before a request is parsed: `Some(reply)` answers it (MOVED, CROSSSLOT,
    /// CLUSTERDOWN) instead of running it. The ASKING flag covers this one request only.
    /// Unknown commands and wrong arity pass: the parser reports them.
    pub fn check(&mut self, args: &[Bytes]) -> Option<Reply> {
        let asking = std::mem::take(&mut self.asking)
            || args
                .first()
                .is_some_and(|name| name.eq_ignore_ascii_case(b"restore-asking"));
        let positions = key_positions(args).ok()?;
        let map = self.map.borrow();
        let readonly_read = self.readonly && !command::Command::flags(args).contains(&"write");
        redirect::at_connection(
            &map,
            positions.iter().map(|&i| &args[i][..]),
            asking,
            readonly_read,
        )
    }

    /// ASKING: the next request may touch a slot this node is importing.
    pub fn set_asking(&mut self) {
        self.asking = true;
    }

    /// READONLY / READWRITE: whether this client reads its primary's slots on a replica.
    pub fn set_readonly(&mut self, on: bool) {
        self.readonly = on;
    }

    pub fn is_readonly(&self) -> bool {
        self.readonly
    }
}

/// Where a request's keys are, for the slot check: the command table's positions, except
/// MIGRATE, whose keys follow `KEYS` when its key argument is empty (Redis's
/// `migrateGetKeys`).
pub fn key_positions(args: &[Bytes]) -> Result<Vec<usize>, CommandError> {
    let positions = command::key_positions(args)?;
    let is_migrate = args[0].eq_ignore_ascii_case(b"migrate");
    if is_migrate && args.get(3).is_some_and(|key| key.is_empty()) {
        let keys_at = args
            .iter()
            .skip(6)
            .position(|a| a.eq_ignore_ascii_case(b"keys"))
            .map(|i| i + 6);
        return Ok(keys_at.map_or(Vec::new(), |at| (at + 1..args.len()).collect()));
    }
    Ok(positions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|s| Bytes::from(if s == "''" { "" } else { s }.to_owned()))
            .collect()
    }

    #[test]
    fn migrate_keys_follow_keys() {
        assert_eq!(key_positions(&args("MIGRATE h 1 k 0 0")), Ok(vec![3]));
        assert_eq!(
            key_positions(&args("migrate h 1 '' 0 0 COPY KEYS a b")),
            Ok(vec![8, 9])
        );
        assert_eq!(key_positions(&args("migrate h 1 '' 0 0")), Ok(vec![]));
        assert_eq!(key_positions(&args("MSET a 1 b 2")), Ok(vec![1, 3]));
        assert!(key_positions(&args("GET")).is_err());
    }

    #[test]
    fn asking_covers_one_request() {
        let mut map = SlotMap::new(0, vec!["127.0.0.1:7000".into(), "127.0.0.1:7001".into()]);
        for slot in 0..16384 {
            map.assign(slot, 1);
        }
        map.set_importing(15495, 1); // "a"
        let mut gate = ClusterGate::new(Rc::new(RefCell::new(Arc::new(map.seal(true)))));
        let moved = Some(Reply::error("MOVED 15495 127.0.0.1:7001"));
        assert_eq!(gate.check(&args("GET a")), moved);
        gate.set_asking();
        assert_eq!(gate.check(&args("GET a")), None);
        assert_eq!(gate.check(&args("GET a")), moved);
        assert_eq!(gate.check(&args("RESTORE-ASKING a 0 p")), None);
        assert_eq!(gate.check(&args("PING")), None);
    }
}
