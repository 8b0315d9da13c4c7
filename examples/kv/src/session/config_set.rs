//! CONFIG SET, validated here with Redis 7's rules (every name known, none twice, every value
//! valid, else nothing changes). Three parameters change what the server does and go to
//! every shard (`maxmemory`, `maxmemory-policy`, `maxclients`); the settings fixed at start
//! (ports, the log, the database count, ...) are refused as Redis refuses immutable ones;
//! Redis's other parameters are accepted and reported back by CONFIG GET, so tools and test
//! harnesses that set them keep working, but change nothing here (README lists them).

use bytes::Bytes;

use super::{Admission, Session};
use crate::command::{Command, Setting};
use crate::number::parse_memory;
use crate::reply::Reply;
use crate::store::EvictionPolicy;

/// Parameters fixed at start-up here (Redis may allow some at run time).
const IMMUTABLE: &[&str] = &[
    "port",
    "bind",
    "databases",
    "appendonly",
    "appendfsync",
    "dir",
    "requirepass",
    "proto-max-bulk-len",
    "cluster-enabled",
    "io-threads",
    "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size",
    // Fixed at start here (Redis re-binds and reconnects for them).
    "tls-port",
    "tls-cluster",
    "tls-replication",
];

/// Redis 7 parameters accepted and reported, with no effect here.
const ACCEPTED: &[&str] = &[
    "save",
    "hz",
    "dynamic-hz",
    "timeout",
    "tcp-keepalive",
    "loglevel",
    "notify-keyspace-events",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "latency-monitor-threshold",
    "lazyfree-lazy-eviction",
    "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del",
    "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush",
    "activerehashing",
    "active-expire-effort",
    "maxmemory-samples",
    "maxmemory-eviction-tenacity",
    "lfu-log-factor",
    "lfu-decay-time",
    "list-max-listpack-size",
    "list-max-ziplist-size",
    "list-compress-depth",
    "hash-max-listpack-entries",
    "hash-max-listpack-value",
    "hash-max-ziplist-entries",
    "hash-max-ziplist-value",
    "set-max-intset-entries",
    "zset-max-listpack-entries",
    "zset-max-listpack-value",
    "zset-max-ziplist-entries",
    "zset-max-ziplist-value",
    "client-output-buffer-limit",
    "client-query-buffer-limit",
    "stop-writes-on-bgsave-error",
    "rdbcompression",
    "rdbchecksum",
    "lua-time-limit",
    "busy-reply-threshold",
    "repl-diskless-sync",
    "min-replicas-to-write",
    "replica-read-only",
    "close-on-replica-write",
    "aof-use-rdb-preamble",
    "appendfilename",
    "activedefrag",
    "jemalloc-bg-thread",
    "tracking-table-max-keys",
];

fn failed(name: &str, why: &str) -> Reply {
    Reply::error(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

/// One validated parameter: the value CONFIG GET will report, and what the shards apply.
type Checked = (String, Bytes, Option<Setting>);

fn check(name: &str, value: &Bytes) -> Result<Checked, Reply> {
    let text = String::from_utf8_lossy(value);
    let setting = match name {
        "maxmemory" => {
            let bytes = parse_memory(&text)
                .ok_or_else(|| failed(name, "argument must be a memory value"))?;
            return Ok((
                name.to_owned(),
                Bytes::from(bytes.to_string()),
                Some(Setting::MaxMemory(bytes)),
            ));
        }
        "maxmemory-policy" => {
            let policy: EvictionPolicy = text.parse().map_err(|_| {
                failed(
                    name,
                    "argument(s) must be one of the following: noeviction, allkeys-lru, \
                     allkeys-lfu",
                )
            })?;
            return Ok((
                name.to_owned(),
                Bytes::from_static(policy.name().as_bytes()),
                Some(Setting::MaxMemoryPolicy(policy)),
            ));
        }
        "protected-mode" => match text.to_ascii_lowercase().as_str() {
            "yes" => Some(Setting::ProtectedMode(true)),
            "no" => Some(Setting::ProtectedMode(false)),
            _ => return Err(failed(name, "argument must be 'yes' or 'no'")),
        },
        "maxclients" => match text.parse::<usize>() {
            Ok(n) if n >= 1 => Some(Setting::MaxClients(n)),
            _ => {
                return Err(failed(
                    name,
                    "argument must be between 1 and 4294967295 inclusive",
                ))
            }
        },
        _ if IMMUTABLE.contains(&name) => return Err(failed(name, "can't set immutable config")),
        // Checked here as far as the value goes; the files are read when it is applied.
        _ if name.starts_with("tls-") => {
            crate::server::tls::TlsSettings::default()
                .set(name, &text)
                .map_err(|why| failed(name, &why))?;
            None
        }
        _ if ACCEPTED.contains(&name) => None,
        _ => {
            return Err(Reply::error(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            )))
        }
    };
    Ok((name.to_owned(), value.clone(), setting))
}

impl Session {
    /// CONFIG SET: all or nothing. Settings the shards apply go out as one
    /// [`Command::ConfigApply`] (answered OK once every shard has it).
    pub(super) fn config_set(&mut self, pairs: Vec<(Bytes, Bytes)>) -> Admission {
        let mut checked: Vec<Checked> = Vec::with_capacity(pairs.len());
        for (name, value) in &pairs {
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            if checked.iter().any(|(seen, _, _)| *seen == name) {
                return Admission::Answered(failed(&name, "duplicate parameter"));
            }
            match check(&name, value) {
                Ok(ok) => checked.push(ok),
                Err(reply) => return Admission::Answered(reply),
            }
        }
        // TLS parameters take effect together (certificates re-read, new connections get
        // them) or not at all, as Redis's TLS reload.
        let tls: Vec<(String, String)> = checked
            .iter()
            .filter(|(name, _, _)| name.starts_with("tls-"))
            .map(|(name, value, _)| (name.clone(), String::from_utf8_lossy(value).into_owned()))
            .collect();
        if let (false, Some(reload)) = (tls.is_empty(), &self.config.tls_reload) {
            if let Err(why) = reload.apply(&tls) {
                tracing::warn!(%why, "CONFIG SET of TLS parameters refused");
                return Admission::Answered(failed(
                    &tls[0].0,
                    "Unable to update TLS configuration. Check server logs.",
                ));
            }
        }
        let mut settings = Vec::new();
        for (name, value, setting) in checked {
            if name == "lua-time-limit" || name == "busy-reply-threshold" {
                // One setting under two names (Redis 7 renamed it); the scripts read it.
                if let Some(ms) = crate::number::parse_i64(&value).filter(|&ms| ms >= 0) {
                    (self.config.script_busy.threshold_ms)
                        .store(ms as u64, std::sync::atomic::Ordering::Relaxed);
                }
                self.config.parameters.set("lua-time-limit", value.clone());
                self.config
                    .parameters
                    .set("busy-reply-threshold", value.clone());
            }
            self.config.parameters.set(&name, value);
            settings.extend(setting);
        }
        if settings.is_empty() {
            Admission::Answered(Reply::ok())
        } else {
            Admission::Forward(Command::ConfigApply(settings))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_follow_redis() {
        assert!(check("hz", &Bytes::from("20")).unwrap().2.is_none());
        assert_eq!(
            check("maxmemory", &Bytes::from("1mb")).unwrap().2,
            Some(Setting::MaxMemory(1 << 20))
        );
        assert!(check("port", &Bytes::from("1")).is_err());
        assert!(check("nosuch", &Bytes::from("1")).is_err());
        assert!(check("maxclients", &Bytes::from("0")).is_err());
        assert!(check("maxmemory-policy", &Bytes::from("volatile-lru")).is_err());
    }
}
