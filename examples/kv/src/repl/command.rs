//! The replication commands: their table rows and parsing (Redis 7.0's arities, flags and
//! error wording). The master side answers PSYNC, SYNC, REPLCONF, WAIT and ROLE (see
//! `server/repl_master.rs`).

use bytes::Bytes;

use crate::command::table::{spec, CommandKind, CommandSpec};
use crate::command::{Command, CommandError};

/// A replication request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplRequest {
    /// `PSYNC replid offset`
    Psync { replid: Bytes, offset: i64 },
    /// `SYNC`: the old protocol, always a full synchronization without `+FULLRESYNC`.
    Sync,
    /// `REPLCONF option value ...`
    ReplConf(Vec<ReplConf>),
    /// `WAIT numreplicas timeout` (timeout in ms, 0: none).
    Wait { replicas: u64, timeout_ms: u64 },
    /// `ROLE`
    Role,
}

/// One `REPLCONF` option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplConf {
    ListeningPort(u16),
    IpAddress(Bytes),
    /// `capa eof`, `capa psync2` (unknown capabilities are ignored, as Redis does).
    Capa(Bytes),
    /// `ack <offset> [fack <offset>]`: a replica's processed offset; never answered.
    Ack(u64),
    /// `getack *`: the master asks its replica for an ACK (a replica's request).
    GetAck,
    /// `shard-streams <N>`: a corewire replica with `N` shards offers per-shard streams
    /// (see [`crate::repl::shards`]).
    ShardStreams(u64),
    /// `key-map <name>`: the offer's key→shard map.
    KeyMap(Bytes),
    /// `shard <i>`: with the offer, the connection is replica shard `i`'s own link.
    Shard(u64),
    /// Accepted and ignored (`rdb-only`, `rdb-filter-only`).
    Ignored,
}

impl ReplRequest {
    /// The command table's name.
    pub fn name(&self) -> &'static str {
        match self {
            ReplRequest::Psync { .. } => "psync",
            ReplRequest::Sync => "sync",
            ReplRequest::ReplConf(_) => "replconf",
            ReplRequest::Wait { .. } => "wait",
            ReplRequest::Role => "role",
        }
    }

    /// PSYNC and SYNC (their link writes the answer) and `REPLCONF ACK`/`GETACK` (no
    /// reply): the connection sends nothing for the request itself.
    pub fn is_unanswered(&self) -> bool {
        match self {
            ReplRequest::Psync { .. } | ReplRequest::Sync => true,
            ReplRequest::ReplConf(options) => options
                .iter()
                .any(|o| matches!(o, ReplConf::Ack(_) | ReplConf::GetAck)),
            _ => false,
        }
    }
}

/// Which command a table row parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    Psync,
    Sync,
    ReplConf,
    Wait,
    Role,
}

const fn row(
    sub: Sub,
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
) -> CommandSpec {
    spec(CommandKind::Repl(sub), name, arity, flags, (0, 0, 0))
}

/// This family's rows of the command table (Redis 7.0's flags).
pub(crate) static COMMANDS: [CommandSpec; 5] = [
    row(
        Sub::Psync,
        "psync",
        -3,
        &["admin", "noscript", "no_async_loading", "no_multi"],
    ),
    row(
        Sub::Sync,
        "sync",
        1,
        &["admin", "noscript", "no_async_loading", "no_multi"],
    ),
    row(
        Sub::ReplConf,
        "replconf",
        -1,
        &["admin", "noscript", "loading", "stale", "allow_busy"],
    ),
    row(Sub::Wait, "wait", 3, &["noscript"]),
    row(
        Sub::Role,
        "role",
        1,
        &["noscript", "loading", "stale", "fast"],
    ),
];

fn integer(arg: &[u8]) -> Result<i64, CommandError> {
    crate::number::parse_i64(arg).ok_or(CommandError::NotAnInteger)
}

/// Parses the arguments after the name.
pub(crate) fn parse(sub: Sub, args: Vec<Bytes>) -> Result<Command, CommandError> {
    let request = match sub {
        Sub::Psync => {
            let offset = integer(&args[1])?;
            ReplRequest::Psync {
                replid: args[0].clone(),
                offset,
            }
        }
        Sub::Sync => ReplRequest::Sync,
        Sub::Role => ReplRequest::Role,
        Sub::Wait => {
            let replicas = integer(&args[0])?;
            let timeout = crate::number::parse_i64(&args[1]).ok_or_else(|| {
                CommandError::Text("ERR timeout is not an integer or out of range".into())
            })?;
            if timeout < 0 {
                return Err(CommandError::Text("ERR timeout is negative".into()));
            }
            ReplRequest::Wait {
                replicas: replicas.max(0) as u64,
                timeout_ms: timeout as u64,
            }
        }
        Sub::ReplConf => ReplRequest::ReplConf(parse_replconf(&args)?),
    };
    Ok(Command::Repl(request))
}

fn parse_replconf(args: &[Bytes]) -> Result<Vec<ReplConf>, CommandError> {
    if !args.len().is_multiple_of(2) {
        return Err(CommandError::Syntax);
    }
    let mut options = Vec::with_capacity(args.len() / 2);
    for pair in args.chunks_exact(2) {
        let (name, value) = (pair[0].to_ascii_lowercase(), &pair[1]);
        let option = match name.as_slice() {
            b"listening-port" => {
                let port = integer(value)?;
                ReplConf::ListeningPort(u16::try_from(port).unwrap_or(0))
            }
            b"ip-address" => ReplConf::IpAddress(value.clone()),
            b"capa" => ReplConf::Capa(value.clone()),
            b"ack" => ReplConf::Ack(integer(value)?.max(0) as u64),
            // `fack` rides along with `ack` (AOF fsynced offset); nothing to do with it here.
            b"fack" => ReplConf::Ignored,
            b"getack" => ReplConf::GetAck,
            b"rdb-only" | b"rdb-filter-only" => ReplConf::Ignored,
            b"shard-streams" => ReplConf::ShardStreams(integer(value)?.max(0) as u64),
            b"key-map" => ReplConf::KeyMap(value.clone()),
            b"shard" => ReplConf::Shard(integer(value)?.max(0) as u64),
            _ => {
                return Err(CommandError::Text(format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(&pair[0])
                )))
            }
        };
        options.push(option);
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str) -> Result<Command, CommandError> {
        let args: Vec<Bytes> = line
            .split_whitespace()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect();
        Command::parse(args)
    }

    #[test]
    fn parses_the_handshake() {
        assert_eq!(
            parse_line("REPLCONF listening-port 6380 capa eof capa psync2"),
            Ok(Command::Repl(ReplRequest::ReplConf(vec![
                ReplConf::ListeningPort(6380),
                ReplConf::Capa(Bytes::from("eof")),
                ReplConf::Capa(Bytes::from("psync2")),
            ])))
        );
        assert_eq!(
            parse_line("psync ? -1"),
            Ok(Command::Repl(ReplRequest::Psync {
                replid: Bytes::from("?"),
                offset: -1
            }))
        );
        assert_eq!(
            parse_line("REPLCONF shard-streams 4 key-map crc16-slot-mod"),
            Ok(Command::Repl(ReplRequest::ReplConf(vec![
                ReplConf::ShardStreams(4),
                ReplConf::KeyMap(Bytes::from("crc16-slot-mod")),
            ])))
        );
        assert_eq!(
            parse_line("REPLCONF shard-streams 4 key-map crc16-slot-mod shard 3"),
            Ok(Command::Repl(ReplRequest::ReplConf(vec![
                ReplConf::ShardStreams(4),
                ReplConf::KeyMap(Bytes::from("crc16-slot-mod")),
                ReplConf::Shard(3),
            ])))
        );
        let ack = parse_line("REPLCONF ACK 123 FACK 100").unwrap();
        assert!(matches!(&ack, Command::Repl(r) if r.is_unanswered()));
    }

    #[test]
    fn refuses_as_redis_does() {
        assert_eq!(parse_line("REPLCONF ack"), Err(CommandError::Syntax));
        assert_eq!(
            parse_line("REPLCONF foo bar").unwrap_err().to_string(),
            "ERR Unrecognized REPLCONF option: foo"
        );
        assert_eq!(
            parse_line("WAIT 1 -1").unwrap_err().to_string(),
            "ERR timeout is negative"
        );
        assert_eq!(parse_line("WAIT x 0"), Err(CommandError::NotAnInteger));
        assert_eq!(
            parse_line("WAIT 1 0"),
            Ok(Command::Repl(ReplRequest::Wait {
                replicas: 1,
                timeout_ms: 0
            }))
        );
    }
}
