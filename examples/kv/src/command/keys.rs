//! The keys of a parsed command, in request order: what the cluster check on the owning
//! shard hashes. It agrees with the command table's key positions (tested below).

use super::Command;

impl Command {
    /// The key of a string command that has exactly one (GET, SET, INCR, ...): found without
    /// the vector [`Command::keys`] makes. `None` for every other command, whatever its keys.
    pub fn single_key(&self) -> Option<&[u8]> {
        match self {
            Command::Get(key)
            | Command::GetSet { key, .. }
            | Command::IncrBy { key, .. }
            | Command::Append { key, .. }
            | Command::Strlen(key)
            | Command::Ttl { key, .. }
            | Command::Persist(key) => Some(key),
            Command::Set(set) => Some(&set.key),
            Command::Expire(expire) => Some(&expire.key),
            _ => None,
        }
    }

    /// The keys the command reads or writes.
    pub fn keys(&self) -> Vec<&[u8]> {
        match self {
            Command::Get(key)
            | Command::GetSet { key, .. }
            | Command::IncrBy { key, .. }
            | Command::Append { key, .. }
            | Command::Strlen(key)
            | Command::Ttl { key, .. }
            | Command::Persist(key) => vec![key],
            Command::Set(set) => vec![&set.key],
            Command::Expire(expire) => vec![&expire.key],
            Command::Del(keys) | Command::Exists(keys) | Command::MGet(keys) => {
                keys.iter().map(|k| &k[..]).collect()
            }
            Command::MSet(pairs) => pairs.iter().map(|(k, _)| &k[..]).collect(),
            Command::Cluster(request) => request.keys(),
            Command::Typed(typed) => typed.keys(),
            Command::Key(key) => key.keys(),
            Command::Script(script) => script.keys(),
            Command::Watch(keys) => keys.iter().map(|k| &k[..]).collect(),
            Command::Ping(_)
            | Command::Echo(_)
            | Command::DbSize
            | Command::FlushAll
            | Command::Info(_)
            | Command::ConfigGet(_)
            | Command::Introspect(_)
            | Command::Client(_)
            | Command::Auth { .. }
            | Command::Acl(_)
            | Command::Replica(_)
            | Command::Repl(_)
            | Command::Quit
            | Command::Reset
            | Command::Select(_)
            | Command::BgRewriteAof
            | Command::Multi
            | Command::Exec
            | Command::Discard
            | Command::Unwatch
            | Command::Transaction(_)
            | Command::Subscription(_)
            | Command::Publish { .. }
            | Command::PubSub(_)
            | Command::ShardPubSub(_)
            | Command::Hello(_)
            | Command::ConfigSet(_)
            | Command::ConfigApply(_)
            | Command::ConfigResetStat
            | Command::ConfigRewrite
            | Command::Help { .. } => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::super::key_positions;
    use super::*;

    /// Typed keys and table positions agree.
    #[test]
    fn keys_match_the_table() {
        for line in [
            "GET k",
            "SET k v EX 10",
            "GETSET k v",
            "DEL a b c",
            "EXISTS a",
            "INCRBY k 2",
            "APPEND k v",
            "STRLEN k",
            "MGET a b",
            "MSET a 1 b 2",
            "PEXPIRE k 5 NX",
            "TTL k",
            "PERSIST k",
            "DBSIZE",
            "PING",
            "DUMP k",
            "RESTORE k 0 p REPLACE",
            "RESTORE-ASKING k 0 p",
        ] {
            let args: Vec<Bytes> = line.split(' ').map(|s| Bytes::from(s.to_owned())).collect();
            let from_table: Vec<&[u8]> = key_positions(&args)
                .unwrap()
                .into_iter()
                .map(|i| &args[i][..])
                .collect();
            let command = Command::parse(args.clone()).unwrap();
            assert_eq!(command.keys(), from_table, "{line}");
            if let Some(key) = command.single_key() {
                assert_eq!(vec![key], from_table, "{line}");
            }
        }
    }
}
