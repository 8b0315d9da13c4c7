//! The scripting family: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FUNCTION, FCALL and
//! FCALL_RO, in Redis 7.0's Lua 5.1 environment. This module holds the family's table rows,
//! argument parsing and the sans-I/O parts (the Lua environment, its libraries, the type
//! conversions, the function libraries); the glue that runs a script on a shard, holding the
//! shards of its keys, is `server/script.rs`.
//!
//! Where a script runs: on the shard of its first key (a script without keys runs on the
//! connection's shard), holding, through the transaction lock protocol, every shard its
//! declared keys live on plus that one. A script without declared keys holds every shard:
//! it may touch any key, and like in Redis nothing interleaves with it. A key the script did
//! not declare works when its shard is held; otherwise the script gets an error (standalone
//! mode: the shard is taken then if the lock order allows it, see `server/script.rs`; cluster
//! mode: Redis's "non local key" error). In cluster mode the declared keys must share a slot
//! (CROSSSLOT otherwise).

pub mod call;
pub mod convert;
pub mod env;
pub mod functions;
pub mod libs;

pub use functions::Libraries;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;

use crate::command::table::{spec, CommandKind, CommandSpec};
use crate::command::CommandError;
use crate::number::parse_i64;

/// A scripting request: which command, and its arguments after the name (after the
/// subcommand for SCRIPT and FUNCTION).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptCommand {
    pub op: ScriptOp,
    pub args: Vec<Bytes>,
    /// The caller's ACL user when it is restricted: the script's commands are checked
    /// against it (`None`: everything is allowed).
    pub user: Option<std::sync::Arc<crate::acl::User>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptOp {
    Eval,
    EvalSha,
    EvalRo,
    EvalShaRo,
    FCall,
    FCallRo,
    ScriptLoad,
    ScriptExists,
    ScriptFlush,
    ScriptKill,
    ScriptHelp,
    FunctionLoad,
    FunctionList,
    FunctionDelete,
    FunctionFlush,
    FunctionDump,
    FunctionRestore,
    FunctionStats,
    FunctionKill,
    FunctionHelp,
    /// SCRIPT or FUNCTION without a subcommand (arity lets them through as containers).
    Container,
}

impl ScriptOp {
    pub fn name(self) -> &'static str {
        match self {
            ScriptOp::Eval => "eval",
            ScriptOp::EvalSha => "evalsha",
            ScriptOp::EvalRo => "eval_ro",
            ScriptOp::EvalShaRo => "evalsha_ro",
            ScriptOp::FCall => "fcall",
            ScriptOp::FCallRo => "fcall_ro",
            ScriptOp::ScriptLoad => "script|load",
            ScriptOp::ScriptExists => "script|exists",
            ScriptOp::ScriptFlush => "script|flush",
            ScriptOp::ScriptKill => "script|kill",
            ScriptOp::ScriptHelp => "script|help",
            ScriptOp::FunctionLoad => "function|load",
            ScriptOp::FunctionList => "function|list",
            ScriptOp::FunctionDelete => "function|delete",
            ScriptOp::FunctionFlush => "function|flush",
            ScriptOp::FunctionDump => "function|dump",
            ScriptOp::FunctionRestore => "function|restore",
            ScriptOp::FunctionStats => "function|stats",
            ScriptOp::FunctionKill => "function|kill",
            ScriptOp::FunctionHelp => "function|help",
            ScriptOp::Container => "script",
        }
    }

    /// EVAL and friends, FCALL and FCALL_RO: they run a script over keys.
    pub fn runs_script(self) -> bool {
        matches!(
            self,
            ScriptOp::Eval
                | ScriptOp::EvalSha
                | ScriptOp::EvalRo
                | ScriptOp::EvalShaRo
                | ScriptOp::FCall
                | ScriptOp::FCallRo
        )
    }

    pub fn is_read_only(self) -> bool {
        matches!(
            self,
            ScriptOp::EvalRo | ScriptOp::EvalShaRo | ScriptOp::FCallRo
        )
    }

    /// Whether it changes what every shard must know (the script cache, the function
    /// libraries).
    pub fn is_function_write(self) -> bool {
        matches!(
            self,
            ScriptOp::FunctionLoad
                | ScriptOp::FunctionDelete
                | ScriptOp::FunctionFlush
                | ScriptOp::FunctionRestore
        )
    }
}

impl ScriptCommand {
    /// The declared keys of EVAL/FCALL (none when the count is malformed: the run reports
    /// it).
    pub fn keys(&self) -> Vec<&[u8]> {
        match self.numkeys() {
            Ok(n) if self.op.runs_script() => self.args[2..2 + n].iter().map(|k| &k[..]).collect(),
            _ => Vec::new(),
        }
    }

    /// EVAL's `numkeys`, checked against the arguments as Redis checks it.
    pub fn numkeys(&self) -> Result<usize, CommandError> {
        let raw = self.args.get(1).ok_or(CommandError::Syntax)?;
        let n = parse_i64(raw).ok_or_else(|| {
            CommandError::Text("ERR value is not an integer or out of range".into())
        })?;
        if n < 0 {
            return Err(CommandError::Text(
                "ERR Number of keys can't be negative".into(),
            ));
        }
        if n as u64 > (self.args.len() - 2) as u64 {
            return Err(CommandError::Text(
                "ERR Number of keys can't be greater than number of args".into(),
            ));
        }
        Ok(n as usize)
    }
}

/// Positions of EVAL's and FCALL's declared keys in a request (`args[0]` is the name).
pub fn key_positions(args: &[Bytes]) -> Vec<usize> {
    let n = args
        .get(2)
        .and_then(|n| parse_i64(n))
        .filter(|&n| n > 0 && (n as u64) <= (args.len() - 3) as u64)
        .unwrap_or(0) as usize;
    (3..3 + n).collect()
}

const EVAL_FLAGS: &[&str] = &[
    "noscript",
    "stale",
    "skip_monitor",
    "may_replicate",
    "no_mandatory_keys",
    "movablekeys",
];
const EVAL_RO_FLAGS: &[&str] = &[
    "readonly",
    "noscript",
    "stale",
    "skip_monitor",
    "no_mandatory_keys",
    "movablekeys",
];
const NOSCRIPT: &[&str] = &["noscript"];
const NOSCRIPT_STALE: &[&str] = &["noscript", "stale"];
const KILL: &[&str] = &["noscript", "allow_busy"];
const FUNCTION_WRITE: &[&str] = &["write", "denyoom", "noscript"];
const NO_KEYS: (i64, i64, i64) = (0, 0, 0);

use CommandKind::Script as S;

static SCRIPT_SUBCOMMANDS: [CommandSpec; 5] = [
    spec(
        S(ScriptOp::ScriptLoad),
        "script|load",
        3,
        NOSCRIPT_STALE,
        NO_KEYS,
    ),
    spec(
        S(ScriptOp::ScriptExists),
        "script|exists",
        -3,
        NOSCRIPT_STALE,
        NO_KEYS,
    ),
    spec(
        S(ScriptOp::ScriptFlush),
        "script|flush",
        -2,
        NOSCRIPT,
        NO_KEYS,
    ),
    spec(S(ScriptOp::ScriptKill), "script|kill", 2, KILL, NO_KEYS),
    spec(
        S(ScriptOp::ScriptHelp),
        "script|help",
        2,
        &["loading", "stale"],
        NO_KEYS,
    ),
];

static FUNCTION_SUBCOMMANDS: [CommandSpec; 9] = [
    spec(
        S(ScriptOp::FunctionLoad),
        "function|load",
        -3,
        FUNCTION_WRITE,
        NO_KEYS,
    ),
    spec(
        S(ScriptOp::FunctionList),
        "function|list",
        -2,
        NOSCRIPT,
        NO_KEYS,
    ),
    spec(
        S(ScriptOp::FunctionDelete),
        "function|delete",
        3,
        &["write", "noscript"],
        NO_KEYS,
    ),
    spec(
        S(ScriptOp::FunctionFlush),
        "function|flush",
        -2,
        &["write", "noscript"],
        NO_KEYS,
    ),
    spec(
        S(ScriptOp::FunctionDump),
        "function|dump",
        2,
        NOSCRIPT,
        NO_KEYS,
    ),
    spec(
        S(ScriptOp::FunctionRestore),
        "function|restore",
        -3,
        FUNCTION_WRITE,
        NO_KEYS,
    ),
    spec(
        S(ScriptOp::FunctionStats),
        "function|stats",
        2,
        KILL,
        NO_KEYS,
    ),
    spec(S(ScriptOp::FunctionKill), "function|kill", 2, KILL, NO_KEYS),
    spec(
        S(ScriptOp::FunctionHelp),
        "function|help",
        2,
        &["loading", "stale"],
        NO_KEYS,
    ),
];

/// The family's rows of the command table.
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec(S(ScriptOp::Eval), "eval", -3, EVAL_FLAGS, NO_KEYS),
    spec(S(ScriptOp::EvalSha), "evalsha", -3, EVAL_FLAGS, NO_KEYS),
    spec(S(ScriptOp::EvalRo), "eval_ro", -3, EVAL_RO_FLAGS, NO_KEYS),
    spec(
        S(ScriptOp::EvalShaRo),
        "evalsha_ro",
        -3,
        EVAL_RO_FLAGS,
        NO_KEYS,
    ),
    spec(S(ScriptOp::FCall), "fcall", -3, EVAL_FLAGS, NO_KEYS),
    spec(S(ScriptOp::FCallRo), "fcall_ro", -3, EVAL_RO_FLAGS, NO_KEYS),
    CommandSpec {
        subcommands: &SCRIPT_SUBCOMMANDS,
        ..spec(S(ScriptOp::Container), "script", -2, &[], NO_KEYS)
    },
    CommandSpec {
        subcommands: &FUNCTION_SUBCOMMANDS,
        ..spec(S(ScriptOp::Container), "function", -2, &[], NO_KEYS)
    },
];

/// Scripts running past the busy threshold (`busy-reply-threshold`, alias
/// `lua-time-limit`), as every connection sees them: while one runs, every command not
/// flagged `allow_busy` is answered BUSY, as Redis answers while a script is busy.
#[derive(Debug)]
pub struct Busy {
    pub threshold_ms: AtomicU64,
    evals: AtomicUsize,
    functions: AtomicUsize,
}

/// One node's state: equal only to itself.
impl PartialEq for Busy {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Busy {}

impl Default for Busy {
    fn default() -> Busy {
        Busy {
            threshold_ms: AtomicU64::new(5000),
            evals: AtomicUsize::new(0),
            functions: AtomicUsize::new(0),
        }
    }
}

pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

impl Busy {
    /// The BUSY reply while a script is busy.
    #[inline]
    pub fn refusal(&self) -> Option<crate::reply::Reply> {
        if self.evals.load(Ordering::Relaxed) > 0 {
            Some(crate::reply::Reply::error(BUSY_EVAL))
        } else if self.functions.load(Ordering::Relaxed) > 0 {
            Some(crate::reply::Reply::error(BUSY_FUNCTION))
        } else {
            None
        }
    }

    pub fn enter(&self, function: bool) {
        let counter = if function {
            &self.functions
        } else {
            &self.evals
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn leave(&self, function: bool) {
        let counter = if function {
            &self.functions
        } else {
            &self.evals
        };
        counter.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn threshold(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.threshold_ms.load(Ordering::Relaxed))
    }
}

/// SHA1 of `body` as 40 lowercase hex digits (`redis.sha1hex`, SCRIPT LOAD's reply).
pub fn sha1_hex(body: &[u8]) -> String {
    Sha1::of(body).hex()
}

/// A script's SHA1 digest: the script caches' key. EVALSHA and SCRIPT EXISTS name a script by
/// its 40 hex digits in either case; decoding them into the 20 bytes makes the lookup one
/// fixed-size comparison, with no lowercased copy of the argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sha1([u8; 20]);

impl Sha1 {
    pub fn of(body: &[u8]) -> Sha1 {
        Sha1(sha1_smol::Sha1::from(body).digest().bytes())
    }

    /// 40 hex digits of either case; anything else names no script.
    pub fn from_hex(hex: &[u8]) -> Option<Sha1> {
        /// Each byte's value as a hex digit, 0xff for a byte that is none (one load per
        /// digit on every EVALSHA, no branch per digit class).
        const NIBBLES: [u8; 256] = {
            let mut table = [0xff; 256];
            let mut i = 0;
            while i < 10 {
                table[b'0' as usize + i] = i as u8;
                i += 1;
            }
            let mut i = 0;
            while i < 6 {
                table[b'a' as usize + i] = 10 + i as u8;
                table[b'A' as usize + i] = 10 + i as u8;
                i += 1;
            }
            table
        };
        let hex: &[u8; 40] = hex.try_into().ok()?;
        let mut bytes = [0u8; 20];
        let mut bad = 0;
        for (byte, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
            let (high, low) = (NIBBLES[usize::from(pair[0])], NIBBLES[usize::from(pair[1])]);
            bad |= high | low;
            *byte = high << 4 | low;
        }
        (bad <= 15).then_some(Sha1(bytes))
    }

    /// As Redis names the script: 40 lowercase hex digits.
    pub fn hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = String::with_capacity(40);
        for byte in self.0 {
            text.push(DIGITS[usize::from(byte >> 4)] as char);
            text.push(DIGITS[usize::from(byte & 15)] as char);
        }
        text
    }
}

/// A digest's bytes are already uniformly spread: its first eight serve as the hash input.
impl std::hash::Hash for Sha1 {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let mut head = [0u8; 8];
        head.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(head));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ').map(|s| Bytes::from(s.to_owned())).collect()
    }

    #[test]
    fn numkeys_is_checked_as_redis_checks_it() {
        let eval = |line: &str| ScriptCommand {
            op: ScriptOp::Eval,
            args: args(line),
            user: None,
        };
        assert_eq!(eval("s 2 a b c").numkeys(), Ok(2));
        assert_eq!(eval("s 2 a b c").keys(), vec![&b"a"[..], b"b"]);
        assert!(eval("s 3 a b").numkeys().is_err());
        assert!(eval("s -1").numkeys().is_err());
        assert!(eval("s x").numkeys().is_err());
        assert_eq!(key_positions(&args("EVAL s 2 a b c")), vec![3, 4]);
        assert_eq!(key_positions(&args("EVAL s 5 a")), Vec::<usize>::new());
    }

    #[test]
    fn sha1_matches_redis() {
        assert_eq!(
            sha1_hex(b"return redis.call('get',KEYS[1])"),
            "fd758d1589d044dd850a6f05d52f2eefd27f033f"
        );
    }

    /// EVALSHA's argument names the digest in either case; other lengths and non-hex
    /// digits name nothing.
    #[test]
    fn sha1_hex_round_trips_in_either_case() {
        let sha = Sha1::of(b"return 1");
        let hex = sha.hex();
        assert_eq!(Sha1::from_hex(hex.as_bytes()), Some(sha));
        assert_eq!(
            Sha1::from_hex(hex.to_ascii_uppercase().as_bytes()),
            Some(sha)
        );
        assert_eq!(Sha1::from_hex(&hex.as_bytes()[..39]), None);
        assert_eq!(Sha1::from_hex(format!("{hex}0").as_bytes()), None);
        let mut bad = hex.into_bytes();
        bad[7] = b'g';
        assert_eq!(Sha1::from_hex(&bad), None);
        assert_ne!(Sha1::of(b"return 2"), sha);
    }
}
