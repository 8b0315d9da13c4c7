//! REPLICAOF (and its old name SLAVEOF), on shard 0, which owns the link to the master (see
//! `server/replica`). ROLE is the master side's ([`super::command`]); a replica answers it
//! with its link.

use bytes::Bytes;

use crate::command::table::{spec, CommandKind as K, CommandSpec};
use crate::command::{Command, CommandError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaSub {
    ReplicaOf,
}

/// Where REPLICAOF points this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaOf {
    /// `REPLICAOF NO ONE`: stop replicating, keep the data, become a master.
    NoOne,
    /// `REPLICAOF host port`.
    Master { host: String, port: u16 },
}

/// A request of this family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaRequest {
    ReplicaOf(ReplicaOf),
}

impl ReplicaRequest {
    pub fn name(&self) -> &'static str {
        match self {
            ReplicaRequest::ReplicaOf(_) => "replicaof",
        }
    }
}

const ADMIN: &[&str] = &["admin", "noscript", "stale", "no_async_loading"];

/// This family's rows of the command table.
pub(crate) static COMMANDS: [CommandSpec; 2] = [
    spec(
        K::Replica(ReplicaSub::ReplicaOf),
        "replicaof",
        3,
        ADMIN,
        (0, 0, 0),
    ),
    spec(
        K::Replica(ReplicaSub::ReplicaOf),
        "slaveof",
        3,
        ADMIN,
        (0, 0, 0),
    ),
];

/// Parses `sub`'s arguments (those after the name).
pub(crate) fn parse(sub: ReplicaSub, args: Vec<Bytes>) -> Result<Command, CommandError> {
    let request = match sub {
        ReplicaSub::ReplicaOf => ReplicaRequest::ReplicaOf(parse_target(&args)?),
    };
    Ok(Command::Replica(request))
}

/// `NO ONE`, or a host and a port (Redis takes any integer there; a port outside 0..65535
/// is refused here as not an integer in range).
pub fn parse_target(args: &[Bytes]) -> Result<ReplicaOf, CommandError> {
    let [host, port] = args else {
        return Err(CommandError::Syntax);
    };
    if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        return Ok(ReplicaOf::NoOne);
    }
    let port = std::str::from_utf8(port)
        .ok()
        .and_then(|port| port.parse::<u16>().ok())
        .ok_or(CommandError::NotAnInteger)?;
    Ok(ReplicaOf::Master {
        host: String::from_utf8_lossy(host).into_owned(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    #[test]
    fn targets() {
        assert_eq!(parse_target(&args(&["No", "ONE"])), Ok(ReplicaOf::NoOne));
        assert_eq!(
            parse_target(&args(&["127.0.0.1", "6379"])),
            Ok(ReplicaOf::Master {
                host: "127.0.0.1".into(),
                port: 6379
            })
        );
        assert_eq!(
            parse_target(&args(&["h", "x"])),
            Err(CommandError::NotAnInteger)
        );
        assert_eq!(
            Command::parse(args(&["SLAVEOF", "no", "one"])),
            Ok(Command::Replica(ReplicaRequest::ReplicaOf(
                ReplicaOf::NoOne
            )))
        );
    }
}
