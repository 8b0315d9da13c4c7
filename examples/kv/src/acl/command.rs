//! ACL's table rows and requests. The connection answers them all (see `session/acl.rs`):
//! the users are node-wide state every connection reaches.

use bytes::Bytes;

use crate::command::table::{spec, CommandKind as K, CommandSpec};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclSub {
    Cat,
    DelUser,
    DryRun,
    GenPass,
    GetUser,
    Help,
    List,
    Load,
    Log,
    Save,
    SetUser,
    Users,
    WhoAmI,
}

/// An ACL subcommand and its arguments after the subcommand's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclRequest {
    pub sub: AclSub,
    /// The subcommand as the client wrote it (errors quote it).
    pub subcommand: Bytes,
    pub args: Vec<Bytes>,
}

impl AclRequest {
    pub fn name(&self) -> &'static str {
        match self.sub {
            AclSub::Cat => "acl|cat",
            AclSub::DelUser => "acl|deluser",
            AclSub::DryRun => "acl|dryrun",
            AclSub::GenPass => "acl|genpass",
            AclSub::GetUser => "acl|getuser",
            AclSub::Help => "acl|help",
            AclSub::List => "acl|list",
            AclSub::Load => "acl|load",
            AclSub::Log => "acl|log",
            AclSub::Save => "acl|save",
            AclSub::SetUser => "acl|setuser",
            AclSub::Users => "acl|users",
            AclSub::WhoAmI => "acl|whoami",
        }
    }
}

const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];
const PLAIN: &[&str] = &["noscript", "loading", "stale"];
const NO_KEYS: (i64, i64, i64) = (0, 0, 0);

pub(crate) static SUBCOMMANDS: [CommandSpec; 13] = [
    spec(K::Acl(AclSub::Cat), "acl|cat", -2, PLAIN, NO_KEYS),
    spec(K::Acl(AclSub::DelUser), "acl|deluser", -3, ADMIN, NO_KEYS),
    spec(K::Acl(AclSub::DryRun), "acl|dryrun", -4, ADMIN, NO_KEYS),
    spec(K::Acl(AclSub::GenPass), "acl|genpass", -2, PLAIN, NO_KEYS),
    spec(K::Acl(AclSub::GetUser), "acl|getuser", 3, ADMIN, NO_KEYS),
    spec(
        K::Acl(AclSub::Help),
        "acl|help",
        2,
        &["loading", "stale"],
        NO_KEYS,
    ),
    spec(K::Acl(AclSub::List), "acl|list", 2, ADMIN, NO_KEYS),
    spec(K::Acl(AclSub::Load), "acl|load", 2, ADMIN, NO_KEYS),
    spec(K::Acl(AclSub::Log), "acl|log", -2, ADMIN, NO_KEYS),
    spec(K::Acl(AclSub::Save), "acl|save", 2, ADMIN, NO_KEYS),
    spec(K::Acl(AclSub::SetUser), "acl|setuser", -3, ADMIN, NO_KEYS),
    spec(K::Acl(AclSub::Users), "acl|users", 2, ADMIN, NO_KEYS),
    spec(K::Acl(AclSub::WhoAmI), "acl|whoami", 2, PLAIN, NO_KEYS),
];

/// The `acl` container row.
pub(crate) static COMMANDS: [CommandSpec; 1] = [CommandSpec {
    subcommands: &SUBCOMMANDS,
    ..spec(K::Container, "acl", -2, &[], NO_KEYS)
}];

pub(crate) const HELP: &[&str] = &[
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
];
