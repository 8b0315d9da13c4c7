//! What start-up does with a damaged log: Redis's `aof-load-truncated` for a torn tail, and
//! an explicit flag (`--aof-fix`, Redis's `redis-check-aof --fix`) for anything worse.

use super::replay::Damage;

/// The operator's say over cutting a damaged log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadPolicy {
    /// `--aof-load-truncated yes` (the default, as in Redis): cut a torn last record with a
    /// warning. `no`: refuse to start instead.
    pub load_truncated: bool,
    /// `--aof-fix`: cut at the first bad record even if data follows it (those bytes are
    /// saved next to the log first).
    pub fix: bool,
}

impl Default for LoadPolicy {
    fn default() -> Self {
        LoadPolicy {
            load_truncated: true,
            fix: false,
        }
    }
}

/// What to do about a bad record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Truncate the log at the bad record and start.
    Cut,
    /// Leave the file alone and refuse to start.
    Refuse,
}

impl LoadPolicy {
    pub fn recovery(&self, damage: Damage) -> Recovery {
        match damage {
            _ if self.fix => Recovery::Cut,
            Damage::TornTail if self.load_truncated => Recovery::Cut,
            Damage::TornTail | Damage::Corrupt => Recovery::Refuse,
        }
    }

    /// The flag that would make start-up cut `damage`.
    pub fn flag_to_cut(damage: Damage) -> &'static str {
        match damage {
            Damage::TornTail => "--aof-load-truncated yes",
            Damage::Corrupt => "--aof-fix",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_torn_tail_is_cut_by_default() {
        let default = LoadPolicy::default();
        assert_eq!(default.recovery(Damage::TornTail), Recovery::Cut);
        assert_eq!(default.recovery(Damage::Corrupt), Recovery::Refuse);
        let strict = LoadPolicy {
            load_truncated: false,
            fix: false,
        };
        assert_eq!(strict.recovery(Damage::TornTail), Recovery::Refuse);
        let fix = LoadPolicy {
            load_truncated: false,
            fix: true,
        };
        assert_eq!(fix.recovery(Damage::TornTail), Recovery::Cut);
        assert_eq!(fix.recovery(Damage::Corrupt), Recovery::Cut);
    }
}
