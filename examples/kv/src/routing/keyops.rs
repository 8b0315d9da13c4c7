//! Routes of the keyspace and string commands ([`crate::command::KeyOp`]): KEYS and RANDOMKEY
//! ask every shard, SCAN's cursor names the shard it continues on, TOUCH and UNLINK split
//! like DEL, and the commands that write several keys run when those share a shard.

use bytes::Bytes;

use super::merge::Merger;
use super::plan::{atomic, broadcast, split_keys, FanOut, Route, ShardPart};
use super::slot::shard_of;
use crate::command::{Command, KeyCommand, KeyOp, KeyShape};

pub(super) fn route(command: KeyCommand, shards: usize) -> Route {
    match command.op {
        KeyOp::Keys | KeyOp::RandomKey if shards == 1 => Route::Single {
            shard: 0,
            command: Command::Key(command),
        },
        KeyOp::Keys => broadcast(Command::Key(command), shards, Merger::concat),
        KeyOp::RandomKey => broadcast(Command::Key(command), shards, Merger::any_of),
        KeyOp::Scan => scan(command, shards),
        KeyOp::Touch => split_keys(command.args, shards, touch, |_, parts| Merger::sum(parts)),
        KeyOp::Unlink => split_keys(command.args, shards, unlink, |_, parts| Merger::sum(parts)),
        // BY and GET patterns read keys known only while it runs: every shard is held.
        KeyOp::Sort | KeyOp::SortRo if shards > 1 && command.sort_reads_patterns() => {
            Route::Atomic {
                shards: (0..shards).collect(),
                command: Command::Key(command),
            }
        }
        op => match op.shape() {
            KeyShape::None => Route::Single {
                shard: 0,
                command: Command::Key(command),
            },
            _ => one_shard(command, shards),
        },
    }
}

fn touch(keys: Vec<Bytes>) -> Command {
    Command::Key(KeyCommand {
        op: KeyOp::Touch,
        args: keys,
    })
}

fn unlink(keys: Vec<Bytes>) -> Command {
    Command::Key(KeyCommand {
        op: KeyOp::Unlink,
        args: keys,
    })
}

/// The whole command on the shard owning its keys, or holding every shard they live on.
fn one_shard(command: KeyCommand, shards: usize) -> Route {
    // One shard owns every key: its keys are not even listed (a vector per request).
    if shards == 1 {
        return Route::Single {
            shard: 0,
            command: Command::Key(command),
        };
    }
    let mut owners = command.keys().into_iter().map(|key| shard_of(key, shards));
    let shard = owners.next().unwrap_or(0);
    if owners.all(|owner| owner == shard) {
        Route::Single {
            shard,
            command: Command::Key(command),
        }
    } else {
        atomic(Command::Key(command), shards)
    }
}

/// A client's SCAN cursor: `position * shards + shard`, where `position` is the shard's own
/// cursor (0 = start there). Cursor 0 is thus shard 0's start, and the cursor of shard `s`'s
/// start is `s`. With one shard the client's cursor is the shard's.
pub fn split_cursor(cursor: u64, shards: usize) -> (usize, u64) {
    let shards = shards as u64;
    ((cursor % shards) as usize, cursor / shards)
}

/// The client's cursor after shard `shard` answered with its own cursor `next`: the same
/// shard again, the next shard's start when this one is done, or 0 after the last.
pub fn join_cursor(shard: usize, next: u64, shards: usize) -> u64 {
    if next != 0 {
        next.saturating_mul(shards as u64) + shard as u64
    } else if shard + 1 < shards {
        shard as u64 + 1
    } else {
        0
    }
}

fn scan(mut command: KeyCommand, shards: usize) -> Route {
    // An unparsable cursor goes to shard 0 as is, whose parse reports it.
    let cursor = command
        .args
        .first()
        .and_then(|c| std::str::from_utf8(c).ok()?.parse().ok());
    let Some(cursor) = cursor.filter(|_| shards > 1) else {
        return Route::Single {
            shard: 0,
            command: Command::Key(command),
        };
    };
    let (shard, position) = split_cursor(cursor, shards);
    command.args[0] = Bytes::from(position.to_string());
    Route::FanOut(FanOut {
        parts: vec![ShardPart {
            shard,
            command: Command::Key(command),
        }],
        merger: Merger::scan(shard, shards),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_visit_every_shard_in_turn() {
        for shards in [1, 2, 3, 7] {
            assert_eq!(split_cursor(0, shards), (0, 0));
            for shard in 0..shards {
                for next in [0, 1, 5, 1 << 40] {
                    let joined = join_cursor(shard, next, shards);
                    if next != 0 {
                        assert_eq!(split_cursor(joined, shards), (shard, next));
                    } else if shard + 1 < shards {
                        assert_eq!(split_cursor(joined, shards), (shard + 1, 0));
                    } else {
                        assert_eq!(joined, 0);
                    }
                }
            }
        }
    }
}
