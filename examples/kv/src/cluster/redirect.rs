//! Redis Cluster's redirection rules (`getNodeByQuery`), split in two because a node here
//! has several shards:
//!
//! - [`at_connection`] runs where the client's connection lives, on the request's raw
//!   arguments, before the command is parsed (so a misdirected request gets MOVED, not its
//!   syntax error, as in Redis): one slot per request (CROSSSLOT), unserved slots and the
//!   ASKING handshake of an importing slot.
//! - [`at_owner`] runs on the shard that holds the slot's keys, in the same turn as the
//!   command, so "do we own the slot, is this key still here" cannot change between the
//!   check and the execution: a migration never loses or duplicates a write that raced it.

use super::slots::key_slot;
use super::view::{SlotMap, SlotState, NO_NODE};
use crate::reply::Reply;

pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
pub const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";
pub const UNBOUND: &str = "CLUSTERDOWN Hash slot not served";
pub const DOWN: &str = "CLUSTERDOWN The cluster is down";

/// The one slot of a request's keys. `Ok(None)`: no keys. `Err`: CROSSSLOT.
pub fn single_slot<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Result<Option<u16>, Reply> {
    let mut slot = None;
    for key in keys {
        let this = key_slot(key);
        match slot {
            None => slot = Some(this),
            Some(first) if first != this => return Err(Reply::error(CROSSSLOT)),
            Some(_) => {}
        }
    }
    Ok(slot)
}

fn moved(map: &SlotMap, slot: u16, node: u16) -> Reply {
    Reply::error(format!("MOVED {slot} {}", map.endpoint(node)))
}

fn ask(map: &SlotMap, slot: u16, node: u16) -> Reply {
    Reply::error(format!("ASK {slot} {}", map.endpoint(node)))
}

/// Whether a replica serves the request itself: a read, from a READONLY client, of a slot
/// its primary owns (Redis's read-only client case).
fn replica_reads(map: &SlotMap, owner: u16, readonly_read: bool) -> bool {
    readonly_read && map.primary() != NO_NODE && map.primary() == owner
}

/// The connection's check. `None`: forward the request to the shard owning its slot.
/// `asking`: the client sent ASKING just before, or the command implies it
/// (RESTORE-ASKING). `readonly_read`: the client sent READONLY and the command does not
/// write.
pub fn at_connection<'a>(
    map: &SlotMap,
    keys: impl IntoIterator<Item = &'a [u8]>,
    asking: bool,
    readonly_read: bool,
) -> Option<Reply> {
    let slot = match single_slot(keys) {
        Err(reply) => return Some(reply),
        Ok(None) => return None,
        Ok(Some(slot)) => slot,
    };
    match map.state(slot) {
        SlotState::Unassigned => Some(Reply::error(UNBOUND)),
        _ if !map.is_ok() => Some(Reply::error(DOWN)),
        SlotState::Mine | SlotState::MigratingTo(_) => None,
        SlotState::ImportingFrom { .. } if asking => None,
        SlotState::ImportingFrom { owner } if owner == NO_NODE => Some(Reply::error(UNBOUND)),
        SlotState::Elsewhere(owner) if replica_reads(map, owner, readonly_read) => None,
        SlotState::ImportingFrom { owner } | SlotState::Elsewhere(owner) => {
            Some(moved(map, slot, owner))
        }
    }
}

/// The owning shard's check, run right before the command. `exists` says whether a key is
/// present and not expired (without side effects). `migrate`: the command is MIGRATE,
/// which works locally on any slot that is moving. `read`: the command does not write (a
/// replica serves reads the connection let through, see [`at_connection`]).
pub fn at_owner(
    map: &SlotMap,
    keys: &[&[u8]],
    migrate: bool,
    read: bool,
    mut exists: impl FnMut(&[u8]) -> bool,
) -> Option<Reply> {
    let slot = match single_slot(keys.iter().copied()) {
        Err(reply) => return Some(reply),
        Ok(None) => return None,
        Ok(Some(slot)) => slot,
    };
    let state = map.state(slot);
    let moving = matches!(
        state,
        SlotState::MigratingTo(_) | SlotState::ImportingFrom { .. }
    );
    if migrate && moving {
        return None;
    }
    match state {
        SlotState::Unassigned => Some(Reply::error(UNBOUND)),
        SlotState::Mine => None,
        SlotState::MigratingTo(target) => {
            let missing = keys.iter().filter(|key| !exists(key)).count();
            if missing == 0 {
                None
            } else if missing < keys.len() {
                Some(Reply::error(TRYAGAIN))
            } else {
                // Every key already left (or never existed): the new owner answers.
                Some(ask(map, slot, target))
            }
        }
        // Reached only with ASKING (the connection checked it).
        SlotState::ImportingFrom { .. } => {
            let distinct = keys.iter().skip(1).any(|key| *key != keys[0]);
            if distinct && keys.iter().any(|key| !exists(key)) {
                Some(Reply::error(TRYAGAIN))
            } else {
                None
            }
        }
        SlotState::Elsewhere(owner) if replica_reads(map, owner, read) => None,
        SlotState::Elsewhere(owner) => Some(moved(map, slot, owner)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Node 0 is us at :7000, node 1 at :7001. Slot of "a" (15495) is ours, "b" (3300)
    /// theirs, "c" (7365) migrating to them, "d" (11298) importing from them.
    fn map() -> SlotMap {
        let mut map = SlotMap::new(0, vec!["127.0.0.1:7000".into(), "127.0.0.1:7001".into()]);
        for slot in 0..16384u16 {
            map.assign(slot, if slot < 8192 { 1 } else { 0 });
        }
        map.assign(15495, 0);
        map.assign(7365, 0);
        map.set_migrating(7365, 1);
        map.assign(11298, 1);
        map.set_importing(11298, 1);
        map.seal(true)
    }

    fn err(reply: Option<Reply>) -> String {
        match reply {
            Some(Reply::Error(text)) => String::from_utf8(text.to_vec()).unwrap(),
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn slots_of_the_test_keys() {
        assert_eq!(key_slot(b"a"), 15495);
        assert_eq!(key_slot(b"b"), 3300);
        assert_eq!(key_slot(b"c"), 7365);
        assert_eq!(key_slot(b"d"), 11298);
    }

    #[test]
    fn connection_redirects_like_redis() {
        let map = map();
        let keys = |k: &[&'static str]| k.iter().map(|k| k.as_bytes()).collect::<Vec<_>>();
        assert_eq!(at_connection(&map, keys(&["a"]), false, false), None);
        assert_eq!(at_connection(&map, keys(&[]), false, false), None);
        assert_eq!(
            err(at_connection(&map, keys(&["b"]), false, false)),
            "MOVED 3300 127.0.0.1:7001"
        );
        assert_eq!(
            err(at_connection(&map, keys(&["a", "b"]), false, false)),
            CROSSSLOT
        );
        assert_eq!(
            at_connection(&map, keys(&["{a}x", "{a}y", "a"]), false, false),
            None
        );
        // Migrating: decided by the owner, which knows which keys are still here.
        assert_eq!(at_connection(&map, keys(&["c"]), false, false), None);
        // Importing: only with ASKING.
        assert_eq!(
            err(at_connection(&map, keys(&["d"]), false, false)),
            "MOVED 11298 127.0.0.1:7001"
        );
        assert_eq!(at_connection(&map, keys(&["d"]), true, false), None);
    }

    #[test]
    fn unserved_slots_are_cluster_down() {
        let map = SlotMap::new(0, vec!["127.0.0.1:7000".into()]).seal(false);
        assert_eq!(err(at_connection(&map, [&b"a"[..]], false, false)), UNBOUND);
        let mut partial = SlotMap::new(0, vec!["127.0.0.1:7000".into()]);
        partial.assign(15495, 0);
        let partial = partial.seal(false);
        assert_eq!(
            err(at_connection(&partial, [&b"a"[..]], false, false)),
            DOWN
        );
    }

    #[test]
    fn replicas_serve_readonly_reads_of_their_primarys_slots() {
        // Node 0 is a replica of node 1 (:7001); node 2 (:7002) owns the slots of "a".
        let endpoints = vec![
            "127.0.0.1:7000".into(),
            "127.0.0.1:7001".into(),
            "127.0.0.1:7002".into(),
        ];
        let mut map = SlotMap::new(0, endpoints);
        for slot in 0..16384u16 {
            map.assign(slot, if slot == 15495 { 2 } else { 1 });
        }
        map.set_primary(1);
        let map = map.seal(true);
        let b = [&b"b"[..]];
        assert_eq!(
            err(at_connection(&map, b, false, false)),
            "MOVED 3300 127.0.0.1:7001"
        );
        assert_eq!(at_connection(&map, b, false, true), None);
        assert_eq!(
            err(at_connection(&map, [&b"a"[..]], false, true)),
            "MOVED 15495 127.0.0.1:7002"
        );
        let nothing = |_: &[u8]| false;
        assert_eq!(at_owner(&map, &b, false, true, nothing), None);
        assert_eq!(
            err(at_owner(&map, &b, false, false, nothing)),
            "MOVED 3300 127.0.0.1:7001"
        );
    }

    #[test]
    fn owner_asks_for_keys_that_left() {
        let map = map();
        let here = |key: &[u8]| key == b"c" || key == b"{c}1";
        assert_eq!(at_owner(&map, &[b"c"], false, false, here), None);
        assert_eq!(
            err(at_owner(&map, &[b"{c}2"], false, false, here)),
            "ASK 7365 127.0.0.1:7001"
        );
        assert_eq!(
            err(at_owner(&map, &[b"{c}1", b"{c}2"], false, false, here)),
            TRYAGAIN
        );
        // MIGRATE moves whatever is here.
        assert_eq!(at_owner(&map, &[b"{c}2"], true, false, here), None);
        assert_eq!(
            err(at_owner(&map, &[b"b"], false, false, here)),
            "MOVED 3300 127.0.0.1:7001"
        );
        assert_eq!(
            err(at_owner(&map, &[b"a", b"b"], false, false, here)),
            CROSSSLOT
        );
    }

    #[test]
    fn importing_owner_serves_single_keys_and_complete_sets() {
        let map = map();
        let here = |key: &[u8]| key == b"{d}1";
        assert_eq!(at_owner(&map, &[b"d"], false, false, here), None);
        assert_eq!(at_owner(&map, &[b"d", b"d"], false, false, here), None);
        assert_eq!(
            err(at_owner(&map, &[b"{d}1", b"{d}2"], false, false, here)),
            TRYAGAIN
        );
        assert_eq!(
            at_owner(&map, &[b"{d}1", b"{d}1"], false, false, here),
            None
        );
    }
}
