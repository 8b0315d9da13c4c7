//! The connection's side of ACL: its user, AUTH, the permission check of every request
//! (before it is routed, on the connection's shard), the ACL command, and noticing that its
//! user was deleted, replaced (ACL LOAD) or lost the channels it is subscribed to.

use std::cell::RefCell;
use std::sync::Arc;

use bytes::Bytes;

use super::{Admission, Lifecycle, Session};
use crate::acl::catalog::{Catalog, CATEGORIES};
use crate::acl::selector::head_word;
use crate::acl::verdict::{Compiled, Verdict};
use crate::acl::{self, AclRequest, AclSub, Context, Denial, Denied, Reason, User};
use crate::command::table::CommandSpec;
use crate::command::{ClientRequest, ClientsBroadcast, ClientsOp, Command, CommandError};
use crate::reply::Reply;

fn bulk(text: impl AsRef<[u8]>) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(text.as_ref()))
}

thread_local! {
    /// The last command a restricted user ran on this thread (shard), with its catalog id
    /// and that user's verdict on it: a pipeline of one command (the common case) finds them
    /// without the table lookup, the catalog's hash and the user's verdicts. Per thread
    /// rather than per connection: a connection's state is bounded in size (idle memory),
    /// and any connection's hit is checked the same way.
    static LAST_COMMAND: RefCell<LastCommand> = const { RefCell::new(LastCommand::EMPTY) };
}

/// A command, its catalog id and the name a request gave it, byte for byte (up to 16 bytes,
/// as two [`head_word`]s: compared without a call). A request names the command when its
/// name is those bytes (the table found the command by them) and its argument count fits
/// (else the table refuses it, and so must the check). Only commands without subcommands
/// are kept: a container's name does not say which subcommand. `compiled` is the verdict of
/// the user whose verdicts have serial number `serial` (see `acl/verdict.rs`): a connection
/// of another user, or of the same user after its rules changed, has another serial.
struct LastCommand {
    spec: Option<&'static CommandSpec>,
    /// The argument counts the spec's arity accepts, `min..=min + span`, compared here
    /// without reaching for the spec (one wrapping subtraction and one comparison).
    min_args: usize,
    span: usize,
    id: usize,
    name: (u64, u64),
    len: usize,
    serial: u64,
    compiled: Compiled,
}

impl LastCommand {
    const EMPTY: LastCommand = LastCommand {
        spec: None,
        min_args: 0,
        span: 0,
        id: 0,
        name: (0, 0),
        len: 0,
        serial: 0,
        compiled: Compiled::FULL,
    };

    /// The command kept, if `args` names it: its spec, its id, and its verdict if that is
    /// the verdict of the verdicts numbered `serial`.
    #[inline]
    fn find(
        &self,
        args: &[Bytes],
        serial: u64,
    ) -> Option<(&'static CommandSpec, usize, Option<&Compiled>)> {
        let name = args.first()?;
        if name.len() != self.len || words(name) != self.name {
            return None;
        }
        if args.len().wrapping_sub(self.min_args) > self.span {
            return None;
        }
        let compiled = (self.serial == serial).then_some(&self.compiled);
        Some((self.spec?, self.id, compiled))
    }

    /// Keeps the command `args` names (unless it cannot be kept: nothing is then).
    fn keep(&mut self, args: &[Bytes], id: usize, serial: u64, compiled: Compiled) {
        let spec = (args.first().filter(|name| name.len() <= 16))
            .and_then(|name| crate::command::table::find(name))
            .filter(|spec| spec.subcommands.is_empty());
        self.spec = spec;
        if let (Some(spec), Some(name)) = (spec, args.first()) {
            let arity = spec.arity.unsigned_abs() as usize;
            self.min_args = arity;
            self.span = if spec.arity >= 0 {
                0
            } else {
                usize::MAX - arity
            };
            self.id = id;
            self.name = words(name);
            self.len = name.len();
            self.remember(serial, compiled);
        }
    }

    fn remember(&mut self, serial: u64, compiled: Compiled) {
        self.serial = serial;
        self.compiled = compiled;
    }
}

/// What the thread's last command says of a request.
enum Found {
    Allowed,
    Refused(&'static str, Denied),
    /// The verdict is the full check.
    Full(&'static str, usize),
    /// The command, but its verdict is not the user's (see [`LastCommand`]).
    Stale(&'static str, usize),
    /// Not the command kept.
    Miss,
}

/// Bytes 0..8 and 8..16 of `name`, zero-padded.
fn words(name: &[u8]) -> (u64, u64) {
    (
        head_word(name),
        head_word(name.get(8..).unwrap_or_default()),
    )
}

impl Session {
    /// Whether connections start authenticated: the default user is on and needs no
    /// password.
    pub(super) fn default_authenticates(user: &User) -> bool {
        user.enabled && user.nopass
    }

    /// Follows a change of the users (the version moved): the connection's user, looked up
    /// again. `false`: it must close (its user is gone, or was made anew by ACL LOAD, or no
    /// longer has the channels it is subscribed to).
    pub(super) fn acl_sync(&mut self) -> bool {
        let version = self.config.acl.version();
        if version == self.acl_version {
            return true;
        }
        self.acl_version = version;
        let users = self.config.acl.users();
        let Some(user) = users.get(&self.user.name) else {
            return false;
        };
        if user.identity != self.user.identity {
            return false;
        }
        if Arc::ptr_eq(user, &self.user) {
            return true;
        }
        self.user = user.clone();
        !self.pubsub.active() || self.pubsub.permitted_by(&self.user)
    }

    /// A change of the users reached this connection from outside (the shard visits every
    /// connection): whether it must close now.
    pub fn acl_revoked(&mut self) -> bool {
        !self.acl_sync()
    }

    /// A script run by a restricted user carries the user: its commands are checked.
    pub(super) fn with_script_user(&self, command: Command) -> Command {
        match command {
            Command::Script(mut script) if !self.user.unrestricted && script.op.runs_script() => {
                script.user = Some(self.user.clone());
                Command::Script(script)
            }
            command => command,
        }
    }

    /// The name of the connection's user (CLIENT LIST's `user`).
    pub fn username(&self) -> &Bytes {
        &self.user.name
    }

    /// The permission check of a request by an authenticated connection: `None` when
    /// allowed (or when the table refuses it: that error comes first), else the NOPERM error,
    /// logged.
    pub(super) fn acl_refusal(&mut self, args: &[Bytes]) -> Option<Reply> {
        if self.user.unrestricted {
            return None;
        }
        let serial = self.user.verdicts.serial();
        let user = &self.user;
        let found = LAST_COMMAND.with_borrow(|last| match last.find(args, serial) {
            None => Found::Miss,
            Some((spec, id, None)) => Found::Stale(spec.name, id),
            Some((spec, id, Some(compiled))) => match compiled.verdict {
                Verdict::Full => Found::Full(spec.name, id),
                _ => match compiled.check(user, id, args) {
                    Ok(()) => Found::Allowed,
                    Err(denied) => Found::Refused(spec.name, denied),
                },
            },
        });
        let (name, id, compiled) = match found {
            Found::Allowed => return None,
            Found::Refused(name, denied) => return Some(self.deny(denied, name, args)),
            Found::Full(name, id) => (name, id, Compiled::FULL),
            Found::Stale(name, id) => {
                // Another user's verdict, or one of rules since changed.
                let compiled = Compiled::of(user, user.verdicts.get(user, id));
                LAST_COMMAND.with_borrow_mut(|last| last.remember(serial, compiled));
                (name, id, compiled)
            }
            Found::Miss => {
                let name = Command::table_name(args).ok()?;
                let Some(id) = Catalog::get().id(name) else {
                    // Not a Redis command: only a user with every command runs it.
                    return (!self.user.selectors.iter().any(|s| s.allcommands))
                        .then(|| self.deny(Denied::Command, name, args));
                };
                // The user's verdict on the command, worked out once: at most the key is
                // matched.
                let compiled = Compiled::of(user, user.verdicts.get(user, id));
                LAST_COMMAND.with_borrow_mut(|last| last.keep(args, id, serial, compiled));
                (name, id, compiled)
            }
        };
        let (verdict, outcome) = (compiled.verdict, compiled.check(user, id, args));
        match outcome {
            Ok(()) => {
                // SORT's verdict is always the full check (see `Verdict::of`).
                if verdict == Verdict::Full && matches!(name, "sort" | "sort_ro") {
                    if let Some(option) = acl::keys::sort_reads_patterns(args) {
                        if !self.user.reads_every_key(id, args) {
                            return Some(Reply::error(format!(
                                "ERR {option} option of SORT denied due to insufficient ACL \
                                 permissions."
                            )));
                        }
                    }
                }
                None
            }
            Err(denied) => Some(self.deny(denied, name, args)),
        }
    }

    /// EXEC's check of a queued command, with Redis's wording for rules changed meanwhile.
    pub(super) fn acl_recheck(&mut self, args: &[Bytes]) -> Option<Reply> {
        let name = Command::table_name(args).ok()?;
        let id = Catalog::get().id(name)?;
        let denied = self.user.check(id, args).err()?;
        let (reason, object, why) = match denied {
            Denied::Command => (
                Reason::Command,
                Bytes::copy_from_slice(name.as_bytes()),
                "no permission to execute the command or subcommand",
            ),
            Denied::Key(pos) => (
                Reason::Key,
                args[pos].clone(),
                "no permission to touch the specified keys",
            ),
            Denied::Channel(pos) => (
                Reason::Channel,
                args[pos].clone(),
                "no permission to access one of the channels used as arguments",
            ),
        };
        self.acl_log(reason, Context::Multi, object, self.user.name.clone());
        Some(Reply::error(format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and \
             the EXEC call. This command is no longer allowed for the following reason: {why}"
        )))
    }

    fn deny(&mut self, denied: Denied, name: &str, args: &[Bytes]) -> Reply {
        let context = if self.txn.in_multi() {
            Context::Multi
        } else {
            Context::Toplevel
        };
        let (reason, object, text) = match denied {
            Denied::Command => (
                Reason::Command,
                Bytes::copy_from_slice(name.as_bytes()),
                format!("NOPERM this user has no permissions to run the '{name}' command"),
            ),
            Denied::Key(pos) => (
                Reason::Key,
                args[pos].clone(),
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .to_owned(),
            ),
            Denied::Channel(pos) => (
                Reason::Channel,
                args[pos].clone(),
                "NOPERM this user has no permissions to access one of the channels used as \
                 arguments"
                    .to_owned(),
            ),
        };
        self.acl_log(reason, context, object, self.user.name.clone());
        Reply::error(text)
    }

    fn acl_log(&mut self, reason: Reason, context: Context, object: Bytes, username: Bytes) {
        let now_ms = self.unix_us / 1000;
        let client_info = self
            .client_line(now_ms)
            .map(|line| Bytes::from(line.format()))
            .unwrap_or_default();
        let max_len = (self.config.live.get("acllog-max-len"))
            .and_then(|n| n.parse().ok())
            .unwrap_or(128);
        self.config.acl.log().add(
            Denial {
                reason,
                context,
                object,
                username,
                client_info,
            },
            now_ms,
            max_len,
        );
    }

    /// AUTH [username] password (and HELLO's AUTH). Redis 7: the two-argument form is the
    /// default user's, refused while it needs no password.
    pub(super) fn auth(&mut self, username: Option<Bytes>, password: &[u8]) -> Reply {
        let users = self.config.acl.users();
        if username.is_none() && users.default_user().nopass {
            return CommandError::AuthNotConfigured.into();
        }
        let name = username.unwrap_or_else(|| Bytes::from_static(b"default"));
        match users.get(&name) {
            Some(user) if user.authenticates(password) => {
                self.user = user.clone();
                self.acl_version = self.config.acl.version();
                self.authenticated = true;
                Reply::ok()
            }
            _ => {
                let context = if self.txn.in_multi() {
                    Context::Multi
                } else {
                    Context::Toplevel
                };
                let object = (self.rare.as_mut().and_then(|rare| rare.auth_name.take()))
                    .unwrap_or_else(|| Bytes::from_static(b"AUTH"));
                self.acl_log(Reason::Auth, context, object, name);
                CommandError::WrongPass.into()
            }
        }
    }

    /// RESET's part: the default user, authenticated if it needs no password.
    pub(super) fn reset_user(&mut self) {
        let users = self.config.acl.users();
        self.user = users.default_user().clone();
        self.acl_version = self.config.acl.version();
        self.authenticated = Self::default_authenticates(&self.user);
    }

    /// The path of the ACL file, relative ones from `dir`; `None` without one.
    fn acl_file(&self) -> Option<std::path::PathBuf> {
        let file = self.config.live.get("aclfile").filter(|f| !f.is_empty())?;
        let path = std::path::PathBuf::from(file);
        if path.is_absolute() {
            return Some(path);
        }
        let dir = self.config.live.get("dir").unwrap_or_default();
        Some(std::path::Path::new(&dir).join(path))
    }

    /// Every shard visits its connections after a change of the users (those that must
    /// close, close); the reply is `reply` once all have. This connection decides for
    /// itself: it closes after the reply if its own user went.
    fn acl_changed(&mut self, seq: u64, deleted: Option<i64>) -> Admission {
        if !self.acl_sync() {
            self.lifecycle = Lifecycle::ClosingAfter(seq);
        }
        Admission::Forward(Command::Client(ClientRequest::Broadcast(Box::new(
            ClientsBroadcast {
                caller: self.identity.id(),
                op: ClientsOp::AclRefresh { deleted },
            },
        ))))
    }

    fn pubsub_default_all(&self) -> bool {
        self.config.live.get("acl-pubsub-default").as_deref() == Some("allchannels")
    }

    /// The ACL command.
    pub(super) fn acl_command(&mut self, request: AclRequest, seq: u64) -> Admission {
        let AclRequest {
            sub,
            subcommand,
            args,
        } = request;
        let reply = match sub {
            AclSub::Cat => acl_cat(&args, &subcommand),
            AclSub::WhoAmI => bulk(&self.user.name),
            AclSub::Users => Reply::Array(
                (self.config.acl.users().map.keys())
                    .map(|name| Reply::Bulk(name.clone()))
                    .collect(),
            ),
            AclSub::List => Reply::Array(
                (self.config.acl.users().map.values())
                    .map(|user| bulk(user.describe()))
                    .collect(),
            ),
            AclSub::GetUser => match self.config.acl.users().get(&args[0]) {
                Some(user) => user.getuser_reply(),
                None => Reply::NullBulk,
            },
            AclSub::GenPass => genpass(args.first()),
            AclSub::Help => crate::introspect::help_reply("ACL", acl::command::HELP),
            AclSub::Log => self.acl_log_command(&args),
            AclSub::DryRun => dry_run(&self.config.acl.users(), &args),
            AclSub::SetUser => match self.set_user(&args) {
                Ok(()) => return self.acl_changed(seq, None),
                Err(reply) => reply,
            },
            AclSub::DelUser => {
                if args.iter().any(|name| name.as_ref() == b"default") {
                    Reply::error("ERR The 'default' user cannot be removed")
                } else {
                    let deleted = self.config.acl.update(|users| -> Result<i64, ()> {
                        Ok(args
                            .iter()
                            .filter(|n| users.map.remove(*n).is_some())
                            .count() as i64)
                    });
                    return self.acl_changed(seq, Some(deleted.unwrap_or(0)));
                }
            }
            AclSub::Load => match self.acl_load() {
                Ok(()) => return self.acl_changed(seq, None),
                Err(reply) => reply,
            },
            AclSub::Save => self.acl_save(),
        };
        Admission::Answered(reply)
    }

    fn set_user(&mut self, args: &[Bytes]) -> Result<(), Reply> {
        let name = &args[0];
        if !acl::file::valid_username(name) {
            return Err(Reply::error(
                "ERR Usernames can't contain spaces or null characters",
            ));
        }
        let rules = acl::user::merge_selector_args(&args[1..]).map_err(|start| {
            Reply::error(format!(
                "ERR Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&start)
            ))
        })?;
        let allchannels = self.pubsub_default_all();
        let acl = &self.config.acl;
        let fresh = acl.new_identity();
        acl.update(|users| {
            let mut user = match users.get(name) {
                Some(existing) => User::clone(existing),
                None => User::new(name.clone(), fresh, allchannels),
            };
            for rule in &rules {
                user.apply(rule, allchannels).map_err(|why| {
                    Reply::error(format!(
                        "ERR Error in ACL SETUSER modifier '{}': {why}",
                        String::from_utf8_lossy(rule)
                    ))
                })?;
            }
            users.map.insert(name.clone(), Arc::new(user));
            Ok(())
        })
    }

    fn acl_log_command(&mut self, args: &[Bytes]) -> Reply {
        let count = match args {
            [] => None,
            [arg] if arg.eq_ignore_ascii_case(b"reset") => {
                self.config.acl.log().reset();
                return Reply::ok();
            }
            [arg] => match crate::number::parse_i64(arg) {
                Some(n) if n >= 0 => Some(n as usize),
                Some(_) => return Reply::error("ERR value is out of range, must be positive"),
                None => return CommandError::NotAnInteger.into(),
            },
            _ => return CommandError::Syntax.into(),
        };
        self.config.acl.log().reply(count, self.unix_us / 1000)
    }

    fn acl_load(&mut self) -> Result<(), Reply> {
        let path = self.acl_file().ok_or_else(no_acl_file)?;
        let text = std::fs::read(&path).map_err(|e| {
            Reply::error(format!(
                "ERR Error loading ACLs, opening file '{}': {e}",
                path.display()
            ))
        })?;
        let filename = self.config.live.get("aclfile").unwrap_or_default();
        let allchannels = self.pubsub_default_all();
        let acl = &self.config.acl;
        let default_identity = acl.users().default_user().identity;
        let users = acl::file::parse(&text, &filename, allchannels, default_identity, &mut || {
            acl.new_identity()
        })
        .map_err(|errors| Reply::error(format!("ERR {errors}")))?;
        acl.update(|current| -> Result<(), ()> {
            *current = users;
            Ok(())
        })
        .map_err(|()| Reply::error("ERR internal error"))
    }

    fn acl_save(&self) -> Reply {
        let Some(path) = self.acl_file() else {
            return no_acl_file();
        };
        let text = acl::file::render(&self.config.acl.users());
        let temp = path.with_extension(format!("tmp-{}", std::process::id()));
        let written = std::fs::write(&temp, text).and_then(|()| std::fs::rename(&temp, &path));
        match written {
            Ok(()) => Reply::ok(),
            Err(error) => {
                tracing::warn!("ACL SAVE to {}: {error}", path.display());
                let _ = std::fs::remove_file(&temp);
                Reply::error(
                    "ERR There was an error trying to save the ACLs. Please check the server \
                     logs for more information",
                )
            }
        }
    }
}

fn no_acl_file() -> Reply {
    Reply::error(
        "ERR This Redis instance is not configured to use an ACL file. You may want to specify \
         users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have \
         a Redis configuration file set) in order to store users in the Redis configuration.",
    )
}

/// ACL CAT [category].
fn acl_cat(args: &[Bytes], subcommand: &Bytes) -> Reply {
    match args {
        [] => Reply::Array(CATEGORIES.iter().map(bulk).collect()),
        [category] => {
            let name = String::from_utf8_lossy(category);
            let Some(mask) = acl::catalog::category_bit(&name) else {
                return Reply::error(format!("ERR Unknown category '{name}'"));
            };
            let catalog = Catalog::get();
            Reply::Array(
                catalog
                    .in_category(mask)
                    .map(|id| bulk(catalog.entries[id].name()))
                    .collect(),
            )
        }
        _ => Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
            String::from_utf8_lossy(subcommand)
        )),
    }
}

/// ACL GENPASS [bits]: random hex, `bits` rounded up to whole hex digits.
fn genpass(bits: Option<&Bytes>) -> Reply {
    let bits = match bits {
        None => 256,
        Some(arg) => match crate::number::parse_i64(arg) {
            Some(n) if (1..=4096).contains(&n) => n as usize,
            Some(_) => {
                return Reply::error(
                    "ERR ACL GENPASS argument must be the number of bits for the output \
                     password, a positive number up to 4096",
                )
            }
            None => return CommandError::NotAnInteger.into(),
        },
    };
    let chars = bits.div_ceil(4);
    let mut random = vec![0u8; chars.div_ceil(2)];
    if getrandom::getrandom(&mut random).is_err() {
        random.iter_mut().for_each(|b| *b = fastrand::u8(..));
    }
    let mut hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(chars);
    bulk(hex)
}

/// ACL DRYRUN username command [arg ...].
fn dry_run(users: &acl::Users, args: &[Bytes]) -> Reply {
    let Some(user) = users.get(&args[0]) else {
        return Reply::error(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(&args[0])
        ));
    };
    let request = &args[1..];
    // Any Redis command, implemented here or not: the rules name them all.
    let catalog = Catalog::get();
    let Some(id) = catalog.resolve(request) else {
        return Reply::error(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(&request[0])
        ));
    };
    let meta = catalog.entries[id].meta;
    let name = meta.name;
    let argc = request.len() as i64;
    let arity = i64::from(meta.arity);
    if (arity > 0 && argc != arity) || argc < -arity {
        return Reply::error(format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    match user.check(id, request) {
        Ok(()) => Reply::ok(),
        Err(Denied::Command) => bulk(format!(
            "This user has no permissions to run the '{name}' command"
        )),
        Err(Denied::Key(pos)) => bulk(format!(
            "This user has no permissions to access the '{}' key",
            String::from_utf8_lossy(&request[pos])
        )),
        Err(Denied::Channel(pos)) => bulk(format!(
            "This user has no permissions to access the '{}' channel",
            String::from_utf8_lossy(&request[pos])
        )),
    }
}
