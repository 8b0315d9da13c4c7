//! SCAN over several shards: the client's cursor names the shard it continues on (see
//! `routing/keyops.rs`); a shard that finishes before COUNT keys were returned hands over to
//! the next one in the same call, so a keyspace smaller than COUNT comes back in one reply,
//! as Redis returns it.

use std::rc::Rc;

use bytes::Bytes;
use corewire::runtime::spawn_local;

use super::shard::Shard;
use super::sink::Origin;
use super::txn::held::Held;
use crate::command::{Command, KeyCommand, KeyOp};
use crate::reply::Reply;
use crate::routing::{join_cursor, split_cursor};

/// Whether `command` is a SCAN this module runs: several shards and a valid cursor (the
/// others route as usual, and the shard reports their errors).
pub(crate) fn handles(command: &Command, shards: usize) -> bool {
    matches!(command, Command::Key(KeyCommand { op: KeyOp::Scan, args })
        if shards > 1 && cursor(args).is_some() && count(args).is_some())
}

fn cursor(args: &[Bytes]) -> Option<u64> {
    std::str::from_utf8(args.first()?).ok()?.parse().ok()
}

/// COUNT's value (10 by default); `None` when the options are malformed.
fn count(args: &[Bytes]) -> Option<usize> {
    let mut count = 10;
    for pair in args.get(1..)?.chunks(2) {
        if pair.len() < 2 {
            return None;
        }
        if pair[0].eq_ignore_ascii_case(b"count") {
            count = std::str::from_utf8(&pair[1]).ok()?.parse::<usize>().ok()?;
        }
    }
    (count > 0).then_some(count)
}

pub(crate) fn start(shard: Rc<Shard>, origin: Origin, command: Command) {
    spawn_local(async move {
        let reply = run(&shard, command).await;
        shard.deliver(origin, reply);
    });
}

async fn run(shard: &Rc<Shard>, command: Command) -> Reply {
    let Command::Key(KeyCommand { args, .. }) = command else {
        return Reply::error("ERR internal error: not a SCAN");
    };
    let shards = shard.count;
    let (Some(start), Some(count)) = (cursor(&args), count(&args)) else {
        return Reply::error("ERR internal error: SCAN arguments");
    };
    let (mut target, mut position) = split_cursor(start, shards);
    let held = Held::new(shard.clone());
    let mut keys: Vec<Reply> = Vec::new();
    loop {
        let mut part_args = args.clone();
        part_args[0] = Bytes::from(position.to_string());
        let part = Command::Key(KeyCommand {
            op: KeyOp::Scan,
            args: part_args,
        });
        let Reply::Array(mut pair) = held.ask(target, part).await else {
            return Reply::error("ERR internal error: a shard's SCAN reply");
        };
        let (Some(Reply::Array(found)), Some(Reply::Bulk(next))) = (pair.pop(), pair.pop()) else {
            return Reply::error("ERR internal error: a shard's SCAN reply");
        };
        keys.extend(found);
        let next: u64 = std::str::from_utf8(&next)
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if next != 0 || target + 1 == shards || keys.len() >= count {
            let cursor = join_cursor(target, next, shards);
            return Reply::Array(vec![
                Reply::Bulk(Bytes::from(cursor.to_string())),
                Reply::Array(keys),
            ]);
        }
        target += 1;
        position = 0;
    }
}
