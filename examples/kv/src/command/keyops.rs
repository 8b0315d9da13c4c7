//! Keyspace and string commands beyond the original strings-only set:
//! one table row each and one request shape, like [`super::typed`]. Their options are parsed
//! by the store when the command runs, in each command's Redis 7.0 order.

use bytes::Bytes;

use super::table::{spec, CommandKind, CommandSpec};

/// A keyspace or string command: which one, and its arguments after the name (and after the
/// subcommand for OBJECT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCommand {
    pub op: KeyOp,
    pub args: Vec<Bytes>,
}

/// How a command's keys sit among its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyShape {
    /// No key: runs on every shard (KEYS, RANDOMKEY) or on the shard its cursor names (SCAN).
    None,
    /// `args[0]`
    One,
    /// `args[0]` and `args[1]` (RENAME, COPY)
    Two,
    /// every argument (TOUCH, UNLINK)
    All,
    /// `key value key value ...` (MSETNX)
    Pairs,
    /// every argument after the first (BITOP's `operation destkey key...`)
    AfterFirst,
    /// `args[1]` (PFDEBUG's `subcommand key`)
    Second,
    /// `args[0]` and SORT's STORE destination
    Sort,
}

const RO: &[&str] = &["readonly"];
const RO_FAST: &[&str] = &["readonly", "fast"];
const W: &[&str] = &["write"];
const W_FAST: &[&str] = &["write", "fast"];
const WD: &[&str] = &["write", "denyoom"];
const WD_FAST: &[&str] = &["write", "denyoom", "fast"];
const WD_ADMIN: &[&str] = &["write", "denyoom", "admin"];
const WD_MOVABLE: &[&str] = &["write", "denyoom", "movablekeys"];
const RO_MOVABLE: &[&str] = &["readonly", "movablekeys"];
const ADMIN: &[&str] = &["admin"];

macro_rules! key_ops {
    (
        [$($op:ident $name:literal $arity:literal $flags:ident $shape:ident;)*]
        object: [$($sub:ident $sub_name:literal $sub_arity:literal $sub_flags:ident $sub_keys:expr;)*]
        memory: [$($mem:ident $mem_name:literal $mem_arity:literal $mem_flags:ident $mem_keys:expr;)*]
    ) => {
        /// One variant per command name (OBJECT's per subcommand).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum KeyOp { $($op,)* $($sub,)* $($mem,)* }

        impl KeyOp {
            /// The lowercase Redis name (`object|encoding` for OBJECT's).
            pub fn name(self) -> &'static str {
                match self {
                    $(KeyOp::$op => $name,)*
                    $(KeyOp::$sub => $sub_name,)*
                    $(KeyOp::$mem => $mem_name,)*
                }
            }

            fn flags(self) -> &'static [&'static str] {
                match self {
                    $(KeyOp::$op => $flags,)*
                    $(KeyOp::$sub => $sub_flags,)*
                    $(KeyOp::$mem => $mem_flags,)*
                }
            }

            pub(crate) fn shape(self) -> KeyShape {
                match self {
                    $(KeyOp::$op => KeyShape::$shape,)*
                    $(KeyOp::$sub => if $sub_keys.0 > 0 { KeyShape::One } else { KeyShape::None },)*
                    $(KeyOp::$mem => if $mem_keys.0 > 0 { KeyShape::One } else { KeyShape::None },)*
                }
            }
        }

        static OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
            $(spec(CommandKind::Key(KeyOp::$sub), $sub_name, $sub_arity, $sub_flags, $sub_keys),)*
        ];

        /// MEMORY's subcommands about one key (the MEMORY container is the introspection
        /// family's: see [`crate::introspect`]).
        pub(crate) const MEMORY_KEY_SUBCOMMANDS: [CommandSpec; [$($mem_name,)*].len()] = [
            $(spec(CommandKind::Key(KeyOp::$mem), $mem_name, $mem_arity, $mem_flags, $mem_keys),)*
        ];

        /// This file's rows of the command table.
        pub(crate) static KEY_COMMANDS: &[CommandSpec] = &[
            $(spec(CommandKind::Key(KeyOp::$op), $name, $arity, $flags, table_keys(KeyShape::$shape)),)*
            CommandSpec {
                subcommands: OBJECT_SUBCOMMANDS,
                ..spec(CommandKind::Key(KeyOp::ObjectHelp), "object", -2, &[], (0, 0, 0))
            },
        ];
    };
}

const fn table_keys(shape: KeyShape) -> (i64, i64, i64) {
    match shape {
        KeyShape::None => (0, 0, 0),
        KeyShape::One => (1, 1, 1),
        KeyShape::Two => (1, 2, 1),
        KeyShape::All => (1, -1, 1),
        KeyShape::Pairs => (1, -1, 2),
        KeyShape::AfterFirst => (2, -1, 1),
        KeyShape::Second => (2, 2, 1),
        KeyShape::Sort => (1, 1, 1),
    }
}

const STALE: &[&str] = &["loading", "stale"];

key_ops! {
    [
    SetNx "setnx" 3 WD_FAST One;
    SetEx "setex" 4 WD One;
    PSetEx "psetex" 4 WD One;
    GetDel "getdel" 2 W_FAST One;
    GetEx "getex" -2 W_FAST One;
    GetRange "getrange" 4 RO One;
    Substr "substr" 4 RO One;
    SetRange "setrange" 4 WD One;
    IncrByFloat "incrbyfloat" 3 WD_FAST One;
    ExpireTime "expiretime" 2 RO_FAST One;
    PExpireTime "pexpiretime" 2 RO_FAST One;
    Touch "touch" -2 RO_FAST All;
    Unlink "unlink" -2 W_FAST All;
    Rename "rename" 3 W Two;
    RenameNx "renamenx" 3 W_FAST Two;
    Copy "copy" -3 WD Two;
    MSetNx "msetnx" -3 WD Pairs;
    Keys "keys" 2 RO None;
    Scan "scan" -2 RO None;
    RandomKey "randomkey" 1 RO None;
    FlushDb "flushdb" -1 W None;
    // Bitmaps (see `store/bitmap`)
    SetBit "setbit" 4 WD One;
    GetBit "getbit" 3 RO_FAST One;
    BitCount "bitcount" -2 RO One;
    BitPos "bitpos" -3 RO One;
    BitOp "bitop" -4 WD AfterFirst;
    BitField "bitfield" -2 WD One;
    BitFieldRo "bitfield_ro" -2 RO_FAST One;
    // HyperLogLog (see `store/hll`)
    PfAdd "pfadd" -2 WD_FAST One;
    PfCount "pfcount" -2 RO All;
    PfMerge "pfmerge" -2 WD All;
    PfDebug "pfdebug" 3 WD_ADMIN Second;
    PfSelfTest "pfselftest" 1 ADMIN None;
    Lcs "lcs" -3 RO Two;
    // SORT (see `store/sort`) and LOLWUT
    Sort "sort" -2 WD_MOVABLE Sort;
    SortRo "sort_ro" -2 RO_MOVABLE Sort;
    Lolwut "lolwut" -1 RO_FAST None;
    ]
    object: [
    ObjectEncoding "object|encoding" 3 RO (2, 2, 1);
    ObjectFreq "object|freq" 3 RO (2, 2, 1);
    ObjectHelp "object|help" 2 STALE (0, 0, 0);
    ObjectIdleTime "object|idletime" 3 RO (2, 2, 1);
    ObjectRefCount "object|refcount" 3 RO (2, 2, 1);
    ]
    memory: [
    MemoryUsage "memory|usage" -3 RO (2, 2, 1);
    ]
}

impl KeyOp {
    pub fn is_write(self) -> bool {
        self.flags().contains(&"write")
    }
}

impl KeyCommand {
    /// The keys, in request order.
    pub fn keys(&self) -> Vec<&[u8]> {
        let args = &self.args;
        match self.op.shape() {
            KeyShape::None => Vec::new(),
            KeyShape::One => args.iter().take(1).map(|k| &k[..]).collect(),
            KeyShape::Two => args.iter().take(2).map(|k| &k[..]).collect(),
            KeyShape::All => args.iter().map(|k| &k[..]).collect(),
            KeyShape::Pairs => args.iter().step_by(2).map(|k| &k[..]).collect(),
            KeyShape::AfterFirst => args.iter().skip(1).map(|k| &k[..]).collect(),
            KeyShape::Second => args.iter().skip(1).take(1).map(|k| &k[..]).collect(),
            KeyShape::Sort => {
                let mut keys: Vec<&[u8]> = args.iter().take(1).map(|k| &k[..]).collect();
                if self.op == KeyOp::Sort {
                    keys.extend(super::sort::sort_store_key(args).map(|k| &k[..]));
                }
                keys
            }
        }
    }
}
