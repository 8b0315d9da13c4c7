//! Argument validation for each command, in the order Redis performs it so that the first
//! reported error is the same one Redis would report.

use bytes::Bytes;

use super::table::{self, CommandKind as K, CommandSpec};
use super::{
    Command, CommandError, ExpireCommand, ExpireCondition, ExpireKind, KeyCommand, KeyOp,
    SetCommand, SetCondition, SetExpiry, TimeUnit, TypedCommand, TypedOp,
};
use crate::number::parse_i64;

pub(super) fn parse(mut args: Vec<Bytes>) -> Result<Command, CommandError> {
    parse_named(&mut args).1
}

/// Parses the request in `args`, moving out what the command keeps; what is left there is
/// the caller's to clear (a connection reuses the vector for its next request).
pub(super) fn parse_named(
    args: &mut Vec<Bytes>,
) -> (Option<&'static str>, Result<Command, CommandError>) {
    match resolve_counted(args) {
        Ok((spec, skip)) => (Some(spec.name), parse_spec(spec, skip, args)),
        // Found, then refused for its arity: it is still the command that was called (what
        // INFO's rejected_calls counts and CLIENT LIST's `cmd` shows, as in Redis).
        Err(error @ CommandError::WrongArity { command }) => (Some(command), Err(error)),
        Err(error) => (None, Err(error)),
    }
}

/// `skip`: the name's arguments (2 for a subcommand).
pub(super) fn parse_spec(
    spec: &'static CommandSpec,
    skip: usize,
    args: &mut Vec<Bytes>,
) -> Result<Command, CommandError> {
    let argc = args.len();
    let mut rest = Args {
        args,
        taken: skip,
        command: spec.name,
    };
    let command = match spec.kind {
        K::Ping => {
            if argc > 2 {
                return Err(rest.arity());
            }
            Command::Ping(rest.next_opt())
        }
        K::Echo => Command::Echo(rest.next()?),
        K::Typed(op) => {
            let args = rest.lend();
            // HSET and HMSET take field-value pairs: an even count after the key.
            if matches!(op, TypedOp::HSet | TypedOp::HMSet) && !argc.is_multiple_of(2) {
                return Err(CommandError::WrongArity { command: spec.name });
            }
            Command::Typed(TypedCommand { op, args })
        }
        K::Key(KeyOp::FlushDb) => parse_flush(argc, rest)?,
        // MSETNX takes key-value pairs: an odd count with the name.
        K::Key(KeyOp::MSetNx) if argc.is_multiple_of(2) => {
            return Err(CommandError::WrongArity { command: spec.name });
        }
        K::Key(op) => Command::Key(KeyCommand {
            op,
            args: rest.lend(),
        }),
        K::Get => Command::Get(rest.next()?),
        K::Set => parse_set(rest)?,
        K::GetSet => Command::GetSet {
            key: rest.next()?,
            value: rest.next()?,
        },
        K::Del => Command::Del(rest.lend()),
        K::Exists => Command::Exists(rest.lend()),
        K::Incr => Command::IncrBy {
            key: rest.next()?,
            delta: 1,
        },
        K::Decr => Command::IncrBy {
            key: rest.next()?,
            delta: -1,
        },
        K::IncrBy => Command::IncrBy {
            key: rest.next()?,
            delta: integer(&rest.next()?)?,
        },
        K::DecrBy => {
            let key = rest.next()?;
            let delta = integer(&rest.next()?)?;
            // Negating i64::MIN overflows.
            let delta = delta.checked_neg().ok_or(CommandError::DecrementOverflow)?;
            Command::IncrBy { key, delta }
        }
        K::Append => Command::Append {
            key: rest.next()?,
            value: rest.next()?,
        },
        K::Strlen => Command::Strlen(rest.next()?),
        K::MGet => Command::MGet(rest.lend()),
        K::MSet => {
            // The name plus key-value pairs: an odd count.
            if argc % 2 != 1 {
                return Err(rest.arity());
            }
            let mut args = rest.into_iter();
            let mut pairs = Vec::with_capacity(argc / 2);
            while let (Some(key), Some(value)) = (args.next(), args.next()) {
                pairs.push((key, value));
            }
            Command::MSet(pairs)
        }
        K::Expire => parse_expire(rest, ExpireKind::Expire)?,
        K::PExpire => parse_expire(rest, ExpireKind::PExpire)?,
        K::ExpireAt => parse_expire(rest, ExpireKind::ExpireAt)?,
        K::PExpireAt => parse_expire(rest, ExpireKind::PExpireAt)?,
        K::Ttl => Command::Ttl {
            key: rest.next()?,
            unit: TimeUnit::Seconds,
        },
        K::PTtl => Command::Ttl {
            key: rest.next()?,
            unit: TimeUnit::Millis,
        },
        K::Persist => Command::Persist(rest.next()?),
        K::DbSize => Command::DbSize,
        K::BgRewriteAof => Command::BgRewriteAof,
        K::FlushAll => parse_flush(argc, rest)?,
        K::Info => Command::Info(rest.collect()),
        K::Config(sub) => crate::config::parse(sub, rest.collect())?,
        // A container without subcommand: only COMMAND allows that (CONFIG's arity forbids it).
        // A container without subcommand: its arity forbids that.
        K::Container | K::Client(None) => {
            return Err(CommandError::WrongArity { command: spec.name })
        }
        K::Introspect(sub) => crate::introspect::parse(sub, rest.collect())?,
        K::Repl(sub) => crate::repl::command::parse(sub, rest.collect())?,
        K::Client(Some(sub)) => crate::clients::command::parse(sub, rest.collect())?,
        K::Auth => {
            if argc > 3 {
                return Err(CommandError::Syntax);
            }
            let first = rest.next()?;
            match rest.next_opt() {
                Some(password) => Command::Auth {
                    username: Some(first),
                    password,
                },
                None => Command::Auth {
                    username: None,
                    password: first,
                },
            }
        }
        K::Quit => Command::Quit,
        K::Reset => Command::Reset,
        K::Multi => Command::Multi,
        K::Exec => Command::Exec,
        K::Discard => Command::Discard,
        K::Watch => Command::Watch(rest.collect()),
        K::Unwatch => Command::Unwatch,
        K::PubSub(sub) => super::pubsub::parse(sub, rest.collect())?,
        K::Acl(sub) => Command::Acl(crate::acl::AclRequest {
            sub,
            subcommand: rest.args.get(1).cloned().unwrap_or_default(),
            args: rest.collect(),
        }),
        K::Hello => Command::Hello(Box::new(super::Hello::parse(rest.collect())?)),
        K::Script(op) => Command::Script(crate::scripting::ScriptCommand {
            op,
            args: rest.collect(),
            user: None,
        }),
        K::Replica(sub) => crate::repl::replicaof::parse(sub, rest.collect())?,
        K::Cluster => Command::Cluster(crate::cluster::command::parse(spec.name, rest.collect())?),
        K::Select => {
            let index = integer(&rest.next()?)?;
            if i32::try_from(index).is_err() {
                return Err(CommandError::NotAnInteger);
            }
            Command::Select(index)
        }
    };
    Ok(command)
}

/// FLUSHALL and FLUSHDB `[ASYNC|SYNC]`: both modes flush synchronously, and with one
/// database FLUSHDB is FLUSHALL.
fn parse_flush(argc: usize, mut rest: Args) -> Result<Command, CommandError> {
    if argc > 2 {
        return Err(CommandError::Syntax);
    }
    if let Some(mode) = rest.next_opt() {
        if !is(&mode, "async") && !is(&mode, "sync") {
            return Err(CommandError::Syntax);
        }
    }
    Ok(Command::FlushAll)
}

/// Finds the spec (the subcommand's for containers) and checks arity.
pub(super) fn resolve(args: &[Bytes]) -> Result<&'static CommandSpec, CommandError> {
    resolve_counted(args).map(|(spec, _)| spec)
}

/// [`resolve`], with how many arguments name the command (2 for a subcommand).
pub(super) fn resolve_counted(
    args: &[Bytes],
) -> Result<(&'static CommandSpec, usize), CommandError> {
    let spec = args
        .first()
        .and_then(|name| table::find(name))
        .ok_or_else(|| CommandError::unknown_command(args))?;
    if !spec.accepts_arg_count(args.len()) {
        return Err(CommandError::WrongArity { command: spec.name });
    }
    if spec.subcommands.is_empty() || args.len() < 2 {
        return Ok((spec, 1));
    }
    let sub = table::lookup(spec.subcommands, &args[1]).ok_or_else(|| {
        CommandError::UnknownSubcommand {
            subcommand: args[1].clone(),
            container: Bytes::from(args[0].to_ascii_uppercase()),
        }
    })?;
    if !sub.accepts_arg_count(args.len()) {
        return Err(CommandError::WrongArity { command: sub.name });
    }
    Ok((sub, 2))
}

/// The arguments after the command name, consumed in order. The request's vector itself,
/// `taken` counting those consumed (left empty): the rest become a command's argument
/// vector without a new allocation or an element-by-element copy.
struct Args<'a> {
    args: &'a mut Vec<Bytes>,
    taken: usize,
    command: &'static str,
}

impl<'a> Args<'a> {
    /// Arity was checked against the spec, so a missing argument means the spec and the parser
    /// disagree; reporting an arity error keeps that from ever panicking.
    fn next(&mut self) -> Result<Bytes, CommandError> {
        self.next_opt().ok_or_else(|| self.arity())
    }

    fn next_opt(&mut self) -> Option<Bytes> {
        let arg = std::mem::take(self.args.get_mut(self.taken)?);
        self.taken += 1;
        Some(arg)
    }

    /// The rest moved out one by one (no empty handles left to drop, no shift).
    fn into_iter(self) -> std::vec::Drain<'a, Bytes> {
        self.args.drain(self.taken..)
    }

    /// The rest, moved into a vector of their own (the command's): one allocation, as when
    /// the request's vector itself was handed over, and that vector stays for the next one.
    fn collect(self) -> Vec<Bytes> {
        self.into_iter().collect()
    }

    /// The rest, as the command's vector: the request's own when it fits (see
    /// [`super::argv::lend_rest`]; the store gives it back once it ran the command).
    fn lend(self) -> Vec<Bytes> {
        super::argv::lend_rest(self.args, self.taken)
    }

    /// The rest, read in place (options parsed and dropped: no vector for them).
    fn remaining(&self) -> &[Bytes] {
        self.args.get(self.taken..).unwrap_or_default()
    }

    fn arity(&self) -> CommandError {
        CommandError::WrongArity {
            command: self.command,
        }
    }
}

fn is(arg: &[u8], option: &str) -> bool {
    arg.eq_ignore_ascii_case(option.as_bytes())
}

fn integer(arg: &[u8]) -> Result<i64, CommandError> {
    parse_i64(arg).ok_or(CommandError::NotAnInteger)
}

/// Which expiry option SET saw, before its value is validated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SetTtlOption {
    None,
    KeepTtl,
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// Port of Redis 7's `parseExtendedStringArgumentsOrReply` for SET: repeating the same option
/// is accepted (last value wins), conflicting options are a syntax error.
fn parse_set(mut rest: Args) -> Result<Command, CommandError> {
    let key = rest.next()?;
    let value = rest.next()?;
    let mut condition = SetCondition::Always;
    let mut get = false;
    let mut ttl = SetTtlOption::None;
    let mut ttl_arg: Option<Bytes> = None;
    let options = rest.remaining();
    let mut i = 0;
    while i < options.len() {
        let option = &options[i];
        let next = options.get(i + 1);
        let timed =
            |wanted: SetTtlOption| (ttl == SetTtlOption::None || ttl == wanted) && next.is_some();
        if is(option, "nx") && condition != SetCondition::IfPresent {
            condition = SetCondition::IfAbsent;
        } else if is(option, "xx") && condition != SetCondition::IfAbsent {
            condition = SetCondition::IfPresent;
        } else if is(option, "get") {
            get = true;
        } else if is(option, "keepttl") && matches!(ttl, SetTtlOption::None | SetTtlOption::KeepTtl)
        {
            ttl = SetTtlOption::KeepTtl;
        } else {
            let wanted = if is(option, "ex") {
                SetTtlOption::Ex
            } else if is(option, "px") {
                SetTtlOption::Px
            } else if is(option, "exat") {
                SetTtlOption::ExAt
            } else if is(option, "pxat") {
                SetTtlOption::PxAt
            } else {
                return Err(CommandError::Syntax);
            };
            if !timed(wanted) {
                return Err(CommandError::Syntax);
            }
            ttl = wanted;
            ttl_arg = next.cloned();
            i += 1;
        }
        i += 1;
    }
    let expiry = match (ttl, ttl_arg) {
        (SetTtlOption::None, _) => SetExpiry::Clear,
        (SetTtlOption::KeepTtl, _) => SetExpiry::Keep,
        (option, Some(arg)) => {
            let invalid = CommandError::InvalidExpireTime { command: "set" };
            let amount = integer(&arg)?;
            let seconds = matches!(option, SetTtlOption::Ex | SetTtlOption::ExAt);
            if amount <= 0 || (seconds && amount > i64::MAX / 1000) {
                return Err(invalid);
            }
            let ms = if seconds { amount * 1000 } else { amount } as u64;
            match option {
                SetTtlOption::Ex | SetTtlOption::Px => SetExpiry::AfterMs(ms),
                _ => SetExpiry::AtMs(ms),
            }
        }
        (_, None) => return Err(CommandError::Syntax),
    };
    Ok(Command::Set(SetCommand {
        key,
        value,
        condition,
        expiry,
        get,
    }))
}

/// Port of Redis 7's `expireGenericCommand` argument handling: options first, then the time,
/// then the unit conversion overflow check. The base-time overflow check needs the clock and
/// happens at execution.
fn parse_expire(mut rest: Args, kind: ExpireKind) -> Result<Command, CommandError> {
    let key = rest.next()?;
    let time = rest.next()?;
    let mut condition = ExpireCondition::default();
    for option in rest.remaining() {
        if is(option, "nx") {
            condition.if_no_ttl = true;
        } else if is(option, "xx") {
            condition.if_has_ttl = true;
        } else if is(option, "gt") {
            condition.if_later = true;
        } else if is(option, "lt") {
            condition.if_earlier = true;
        } else {
            return Err(CommandError::UnsupportedOption {
                option: option.clone(),
            });
        }
    }
    if condition.if_no_ttl && (condition.if_has_ttl || condition.if_later || condition.if_earlier) {
        return Err(CommandError::ExpireNxConflict);
    }
    if condition.if_later && condition.if_earlier {
        return Err(CommandError::ExpireGtLtConflict);
    }
    let mut time_ms = integer(&time)?;
    if matches!(kind, ExpireKind::Expire | ExpireKind::ExpireAt) {
        time_ms = time_ms
            .checked_mul(1000)
            .ok_or(CommandError::InvalidExpireTime {
                command: kind.name(),
            })?;
    }
    Ok(Command::Expire(ExpireCommand {
        key,
        kind,
        time_ms,
        condition,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(line: &str) -> Result<Command, CommandError> {
        parse(line.split(' ').map(|s| Bytes::from(s.to_owned())).collect())
    }

    fn b(s: &str) -> Bytes {
        Bytes::from(s.to_owned())
    }

    fn err_text(line: &str) -> String {
        String::from_utf8(cmd(line).unwrap_err().message()).unwrap()
    }

    #[test]
    fn names_are_case_insensitive() {
        assert_eq!(cmd("gEt k"), Ok(Command::Get(b("k"))));
        assert_eq!(cmd("PING"), Ok(Command::Ping(None)));
        assert_eq!(
            cmd("config GET save"),
            Ok(Command::ConfigGet(vec![b("save")]))
        );
    }

    #[test]
    fn arity_errors_use_the_lowercase_full_name() {
        assert_eq!(
            err_text("GET"),
            "ERR wrong number of arguments for 'get' command"
        );
        assert_eq!(
            err_text("get a b"),
            "ERR wrong number of arguments for 'get' command"
        );
        assert_eq!(
            err_text("PING a b"),
            "ERR wrong number of arguments for 'ping' command"
        );
        assert_eq!(
            err_text("MSET a b c"),
            "ERR wrong number of arguments for 'mset' command"
        );
        assert_eq!(
            err_text("CONFIG"),
            "ERR wrong number of arguments for 'config' command"
        );
        assert_eq!(
            err_text("CONFIG GET"),
            "ERR wrong number of arguments for 'config|get' command"
        );
    }

    #[test]
    fn unknown_commands_and_subcommands() {
        assert_eq!(
            err_text("foo bar"),
            "ERR unknown command 'foo', with args beginning with: 'bar' "
        );
        assert_eq!(
            err_text("config nosuch"),
            "ERR unknown subcommand 'nosuch'. Try CONFIG HELP."
        );
        assert_eq!(
            cmd("config set a b"),
            Ok(Command::ConfigSet(vec![(b("a"), b("b"))]))
        );
        assert_eq!(
            err_text("config set a b c"),
            "ERR wrong number of arguments for 'config|set' command"
        );
        assert!(cmd("foo").unwrap_err().is_checked_before_auth());
        assert!(!cmd("incrby k x").unwrap_err().is_checked_before_auth());
    }

    #[test]
    fn set_options() {
        let set = |line: &str| match cmd(line) {
            Ok(Command::Set(set)) => Ok((set.condition, set.expiry, set.get)),
            Ok(other) => panic!("not a SET: {other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(
            set("SET k v"),
            Ok((SetCondition::Always, SetExpiry::Clear, false))
        );
        assert_eq!(
            set("set k v nx ex 10"),
            Ok((SetCondition::IfAbsent, SetExpiry::AfterMs(10_000), false))
        );
        assert_eq!(
            set("set k v XX PX 5 GET"),
            Ok((SetCondition::IfPresent, SetExpiry::AfterMs(5), true))
        );
        assert_eq!(
            set("set k v exat 2"),
            Ok((SetCondition::Always, SetExpiry::AtMs(2000), false))
        );
        assert_eq!(set("set k v pxat 7 keepttl"), Err(CommandError::Syntax));
        assert_eq!(
            set("set k v keepttl"),
            Ok((SetCondition::Always, SetExpiry::Keep, false))
        );
        assert_eq!(
            set("set k v ex 1 ex 2"),
            Ok((SetCondition::Always, SetExpiry::AfterMs(2000), false))
        );
        assert_eq!(set("set k v nx xx"), Err(CommandError::Syntax));
        assert_eq!(set("set k v ex 1 px 1"), Err(CommandError::Syntax));
        assert_eq!(set("set k v ex"), Err(CommandError::Syntax));
        assert_eq!(set("set k v bogus"), Err(CommandError::Syntax));
        assert_eq!(set("set k v ex ten"), Err(CommandError::NotAnInteger));
        assert_eq!(
            err_text("set k v ex 0"),
            "ERR invalid expire time in 'set' command"
        );
        assert_eq!(
            err_text("set k v px -5"),
            "ERR invalid expire time in 'set' command"
        );
        assert_eq!(
            err_text("set k v ex 9223372036854776"),
            "ERR invalid expire time in 'set' command"
        );
        // Syntax is checked before the expire value, as in Redis.
        assert_eq!(set("set k v ex 0 bogus"), Err(CommandError::Syntax));
    }

    #[test]
    fn counters() {
        assert_eq!(
            cmd("incr k"),
            Ok(Command::IncrBy {
                key: b("k"),
                delta: 1
            })
        );
        assert_eq!(
            cmd("decrby k 5"),
            Ok(Command::IncrBy {
                key: b("k"),
                delta: -5
            })
        );
        assert_eq!(cmd("incrby k 1.5"), Err(CommandError::NotAnInteger));
        assert_eq!(
            err_text("decrby k -9223372036854775808"),
            "ERR decrement would overflow"
        );
    }

    #[test]
    fn expire_options() {
        let expire = |line: &str| match cmd(line) {
            Ok(Command::Expire(e)) => Ok((e.time_ms, e.condition)),
            Ok(other) => panic!("not EXPIRE: {other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(
            expire("expire k 10"),
            Ok((10_000, ExpireCondition::default()))
        );
        assert_eq!(expire("pexpire k -3"), Ok((-3, ExpireCondition::default())));
        let xx_gt = ExpireCondition {
            if_has_ttl: true,
            if_later: true,
            ..Default::default()
        };
        assert_eq!(expire("expire k 1 xx gt"), Ok((1000, xx_gt)));
        assert_eq!(err_text("expire k 1 foo"), "ERR Unsupported option foo");
        assert_eq!(
            err_text("expire k 1 nx xx"),
            "ERR NX and XX, GT or LT options at the same time are not compatible"
        );
        assert_eq!(
            err_text("expire k 1 gt lt"),
            "ERR GT and LT options at the same time are not compatible"
        );
        assert_eq!(
            err_text("expireat k 9223372036854776"),
            "ERR invalid expire time in 'expireat' command"
        );
        // Options are validated before the time argument.
        assert_eq!(err_text("expire k x bad"), "ERR Unsupported option bad");
        assert_eq!(expire("expire k x"), Err(CommandError::NotAnInteger));
    }

    #[test]
    fn multi_key_commands() {
        assert_eq!(cmd("del a b"), Ok(Command::Del(vec![b("a"), b("b")])));
        assert_eq!(
            cmd("mset a 1 b 2"),
            Ok(Command::MSet(vec![(b("a"), b("1")), (b("b"), b("2"))]))
        );
        assert_eq!(cmd("mget a"), Ok(Command::MGet(vec![b("a")])));
    }

    #[test]
    fn connection_commands() {
        assert_eq!(
            cmd("auth pw"),
            Ok(Command::Auth {
                username: None,
                password: b("pw")
            })
        );
        assert_eq!(
            cmd("AUTH default pw"),
            Ok(Command::Auth {
                username: Some(b("default")),
                password: b("pw")
            })
        );
        assert_eq!(cmd("auth a b c"), Err(CommandError::Syntax));
        assert_eq!(cmd("select 0"), Ok(Command::Select(0)));
        assert_eq!(cmd("select x"), Err(CommandError::NotAnInteger));
        assert_eq!(cmd("select 4294967296"), Err(CommandError::NotAnInteger));
        assert_eq!(cmd("flushall async"), Ok(Command::FlushAll));
        assert_eq!(cmd("flushall later"), Err(CommandError::Syntax));
        use crate::introspect::{CommandQuery, Request};
        assert_eq!(
            cmd("command"),
            Ok(Command::Introspect(Request::Command(CommandQuery::All)))
        );
        assert_eq!(
            cmd("command count"),
            Ok(Command::Introspect(Request::Command(CommandQuery::Count)))
        );
        assert_eq!(
            cmd("COMMAND DOCS"),
            Ok(Command::Introspect(Request::Command(CommandQuery::Docs(
                vec![]
            ))))
        );
        assert_eq!(
            err_text("command count x"),
            "ERR wrong number of arguments for 'command|count' command"
        );
        assert_eq!(cmd("quit"), Ok(Command::Quit));
    }

    #[test]
    fn binary_keys_survive() {
        let key = Bytes::from_static(b"\x00\xff\r\n");
        assert_eq!(parse(vec![b("GET"), key.clone()]), Ok(Command::Get(key)));
    }
}
