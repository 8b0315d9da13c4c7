//! How a multi-worker server takes new connections.

use std::fmt;
use std::str::FromStr;

/// Accept strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptMode {
    /// One SO_REUSEPORT listener per shard; the kernel spreads connections.
    Reuseport,
    /// One listener; a single acceptor hands connections to the workers.
    Handoff,
}

impl FromStr for AcceptMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "reuseport" => Ok(AcceptMode::Reuseport),
            "handoff" => Ok(AcceptMode::Handoff),
            other => Err(format!("expected reuseport or handoff, got {other:?}")),
        }
    }
}

impl fmt::Display for AcceptMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AcceptMode::Reuseport => "reuseport",
            AcceptMode::Handoff => "handoff",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for mode in [AcceptMode::Reuseport, AcceptMode::Handoff] {
            assert_eq!(mode.to_string().parse::<AcceptMode>(), Ok(mode));
        }
        assert!("both".parse::<AcceptMode>().is_err());
    }
}
