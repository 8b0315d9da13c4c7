use std::fmt;

use bytes::Bytes;

/// A command that cannot be executed, with Redis 7's exact error text (see [`Self::message`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// `preview` is the `'arg' 'arg' ` list Redis appends, already truncated.
    UnknownCommand {
        name: Bytes,
        preview: Bytes,
    },
    /// `container` is the command name as the client spelled it, uppercased.
    UnknownSubcommand {
        subcommand: Bytes,
        container: Bytes,
    },
    WrongArity {
        command: &'static str,
    },
    NotAnInteger,
    Syntax,
    InvalidExpireTime {
        command: &'static str,
    },
    IncrementOverflow,
    DecrementOverflow,
    UnsupportedOption {
        option: Bytes,
    },
    ExpireNxConflict,
    ExpireGtLtConflict,
    DbIndexOutOfRange,
    StringTooLong,
    NoAuth,
    WrongPass,
    AuthNotConfigured,
    /// A connection-level command reached a shard; the glue routed something it should not.
    NotShardCommand {
        command: &'static str,
    },
    /// An error text built at run time, complete (`ERR ...`).
    Text(String),
    /// A cluster command without `--cluster-enabled`.
    ClusterDisabled,
    /// SELECT of a database other than 0 in cluster mode.
    SelectInCluster,
    /// A command that may grow memory, refused past `--maxmemory` (policy `noeviction`, or
    /// nothing left to evict).
    OutOfMemory,
    /// A key holds another type than the command works on.
    WrongType,
    /// A float argument that does not parse (or is NaN).
    NotAFloat,
    /// A count that must be positive (LPOP, SPOP, ZPOPMIN with a count).
    MustBePositive,
    /// A command whose keys live on several shards, which it does not gather.
    KeysOnSeveralShards {
        command: &'static str,
    },
}

/// Redis prints names and arguments with `%.128s`: at most 128 bytes, cut at a NUL.
const MAX_ECHOED_BYTES: usize = 128;

impl CommandError {
    /// Redis checks these before authentication, so an unauthenticated client still sees
    /// them instead of `NOAUTH`.
    pub fn is_checked_before_auth(&self) -> bool {
        matches!(
            self,
            CommandError::UnknownCommand { .. }
                | CommandError::UnknownSubcommand { .. }
                | CommandError::WrongArity { .. }
        )
    }

    pub(crate) fn unknown_command(args: &[Bytes]) -> CommandError {
        let name = args.first().cloned().unwrap_or_default();
        let mut preview = Vec::new();
        for arg in args.iter().skip(1) {
            if preview.len() >= MAX_ECHOED_BYTES {
                break;
            }
            let room = MAX_ECHOED_BYTES - preview.len();
            preview.push(b'\'');
            preview.extend_from_slice(c_string_prefix(arg, room));
            preview.extend_from_slice(b"' ");
        }
        CommandError::UnknownCommand {
            name,
            preview: Bytes::from(preview),
        }
    }

    /// The full error line without the leading `-` and trailing CRLF. Bytes rather than a
    /// `String` because Redis echoes unknown command names verbatim, binary or not.
    pub fn message(&self) -> Vec<u8> {
        match self {
            CommandError::UnknownCommand { name, preview } => {
                let mut out = b"ERR unknown command '".to_vec();
                out.extend_from_slice(c_string_prefix(name, MAX_ECHOED_BYTES));
                out.extend_from_slice(b"', with args beginning with: ");
                out.extend_from_slice(preview);
                out
            }
            CommandError::UnknownSubcommand {
                subcommand,
                container,
            } => {
                let mut out = b"ERR unknown subcommand '".to_vec();
                out.extend_from_slice(c_string_prefix(subcommand, MAX_ECHOED_BYTES));
                out.extend_from_slice(b"'. Try ");
                out.extend_from_slice(c_string_prefix(container, usize::MAX));
                out.extend_from_slice(b" HELP.");
                out
            }
            other => other.to_string().into_bytes(),
        }
    }
}

fn c_string_prefix(bytes: &[u8], max: usize) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end.min(max)]
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::UnknownCommand { .. } | CommandError::UnknownSubcommand { .. } => {
                f.write_str(&String::from_utf8_lossy(&self.message()))
            }
            CommandError::WrongArity { command } => {
                write!(f, "ERR wrong number of arguments for '{command}' command")
            }
            CommandError::NotAnInteger => {
                f.write_str("ERR value is not an integer or out of range")
            }
            CommandError::Syntax => f.write_str("ERR syntax error"),
            CommandError::InvalidExpireTime { command } => {
                write!(f, "ERR invalid expire time in '{command}' command")
            }
            CommandError::IncrementOverflow => {
                f.write_str("ERR increment or decrement would overflow")
            }
            CommandError::DecrementOverflow => f.write_str("ERR decrement would overflow"),
            CommandError::UnsupportedOption { option } => {
                write!(
                    f,
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(option)
                )
            }
            CommandError::ExpireNxConflict => {
                f.write_str("ERR NX and XX, GT or LT options at the same time are not compatible")
            }
            CommandError::ExpireGtLtConflict => {
                f.write_str("ERR GT and LT options at the same time are not compatible")
            }
            CommandError::DbIndexOutOfRange => f.write_str("ERR DB index is out of range"),
            CommandError::StringTooLong => {
                f.write_str("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
            }
            CommandError::NoAuth => f.write_str("NOAUTH Authentication required."),
            CommandError::WrongPass => {
                f.write_str("WRONGPASS invalid username-password pair or user is disabled.")
            }
            CommandError::AuthNotConfigured => f.write_str(
                "ERR AUTH <password> called without any password configured for the default \
                 user. Are you sure your configuration is correct?",
            ),
            CommandError::Text(text) => f.write_str(text),
            CommandError::ClusterDisabled => {
                f.write_str("ERR This instance has cluster support disabled")
            }
            CommandError::SelectInCluster => {
                f.write_str("ERR SELECT is not allowed in cluster mode")
            }
            CommandError::OutOfMemory => {
                f.write_str("OOM command not allowed when used memory > 'maxmemory'.")
            }
            CommandError::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            CommandError::NotAFloat => f.write_str("ERR value is not a valid float"),
            CommandError::MustBePositive => {
                f.write_str("ERR value is out of range, must be positive")
            }
            CommandError::KeysOnSeveralShards { command } => write!(
                f,
                "ERR '{command}' needs all its keys on one shard here: give them a common hash \
                 tag, e.g. {{user1}}:a and {{user1}}:b"
            ),
            CommandError::NotShardCommand { command } => {
                write!(
                    f,
                    "ERR '{command}' is handled by the connection, not by a shard"
                )
            }
        }
    }
}

impl std::error::Error for CommandError {}

impl From<CommandError> for crate::Reply {
    fn from(error: CommandError) -> Self {
        crate::Reply::error_bytes(error.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(e: CommandError) -> String {
        String::from_utf8(e.message()).unwrap()
    }

    #[test]
    fn unknown_command_matches_redis_7() {
        let args = [Bytes::from("foo"), Bytes::from("bar"), Bytes::from("baz")];
        assert_eq!(
            text(CommandError::unknown_command(&args)),
            "ERR unknown command 'foo', with args beginning with: 'bar' 'baz' "
        );
        assert_eq!(
            text(CommandError::unknown_command(&args[..1])),
            "ERR unknown command 'foo', with args beginning with: "
        );
    }

    #[test]
    fn unknown_command_preview_is_bounded() {
        let long = Bytes::from(vec![b'x'; 300]);
        let args = [Bytes::from("foo"), long.clone(), long];
        let message = text(CommandError::unknown_command(&args));
        let preview = message.split(": ").nth(1).unwrap();
        // One quoted 128-byte argument fills the budget; the second is not echoed.
        assert_eq!(preview, format!("'{}' ", "x".repeat(128)));
    }

    #[test]
    fn fixed_messages_match_redis() {
        assert_eq!(
            text(CommandError::WrongArity { command: "get" }),
            "ERR wrong number of arguments for 'get' command"
        );
        assert_eq!(
            text(CommandError::InvalidExpireTime { command: "set" }),
            "ERR invalid expire time in 'set' command"
        );
        assert_eq!(
            text(CommandError::NoAuth),
            "NOAUTH Authentication required."
        );
        assert_eq!(
            text(CommandError::WrongPass),
            "WRONGPASS invalid username-password pair or user is disabled."
        );
        assert_eq!(
            text(CommandError::UnknownSubcommand {
                subcommand: Bytes::from("set"),
                container: Bytes::from("CONFIG"),
            }),
            "ERR unknown subcommand 'set'. Try CONFIG HELP."
        );
    }
}
