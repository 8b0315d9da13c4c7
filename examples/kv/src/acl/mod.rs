//! Redis 7 ACL: users, their selectors and the permission check, as plain state.
//!
//! - [`catalog`]: every Redis command and subcommand with an id and its categories;
//! - [`selector`]: one set of command, key and channel rules, and its check;
//! - [`user`]: passwords, flags and selectors, ACL SETUSER's rules, the descriptions;
//! - `keys`: the keys and channels of a request, from the key specs;
//! - `verdict`: a user's rules on one command, worked out once, for a connection to reuse;
//! - [`log`]: ACL LOG;
//! - [`file`](mod@file): the ACL file (and `user` lines of the configuration).
//!
//! The users are shared by every shard through [`Acl`]: a snapshot (`Arc<Users>`) replaced
//! as a whole by each change, and a version number bumped with it. A connection keeps its
//! user (an `Arc<User>`) and the version it saw; per command it loads the version (one
//! relaxed atomic load, no lock) and only when it moved looks its user up again, which is
//! also when it learns that its user was deleted or its channels revoked. A change also
//! visits every connection at once (see `server/clients.rs`), so an idle one is closed
//! without waiting for its next command. The check itself is a bitmap test per selector;
//! key patterns are matched only for users without `allkeys`, and a user with every
//! command, key and channel skips it. Per request, a restricted user's check starts from its
//! verdict on the command (`verdict`), worked out once: most requests then cost a compare
//! of their key with the few patterns that apply.

pub mod catalog;
pub mod command;
pub mod file;
pub(crate) mod keys;
pub mod log;
pub mod selector;
pub mod user;
pub(crate) mod verdict;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;

pub use command::{AclRequest, AclSub};
pub use log::{AclLog, Context, Denial, Reason};
pub use selector::Denied;
pub use user::User;

/// Why a rule was refused (Redis's `ACLSetUserStringError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    UnknownCommand,
    Syntax,
    KeysAfterAll,
    ChannelsAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeysAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and \
                 does not have any effect. Try 'resetkeys' to start with an empty list of \
                 patterns"
            }
            RuleError::ChannelsAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid \
                 and does not have any effect. Try 'resetchannels' to start with an empty list \
                 of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase \
                 hexadecimal characters"
            }
            RuleError::FirstArgOfSubcommand => {
                "Allowing first-arg of a subcommand is not supported"
            }
        })
    }
}

/// Every user by name (sorted: ACL USERS and ACL LIST list them so).
#[derive(Debug, Clone, Default)]
pub struct Users {
    pub map: BTreeMap<Bytes, Arc<User>>,
}

impl Users {
    /// Only the default user.
    pub fn with_default(identity: u64) -> Users {
        let mut map = BTreeMap::new();
        let user = User::default_user(identity);
        map.insert(user.name.clone(), Arc::new(user));
        Users { map }
    }

    pub fn get(&self, name: &[u8]) -> Option<&Arc<User>> {
        self.map.get(name)
    }

    pub fn default_user(&self) -> &Arc<User> {
        // The default user cannot be deleted, and every replacement set has one.
        self.map
            .get(&b"default"[..])
            .expect("the default user always exists")
    }
}

/// The node's users and ACL log, shared by every shard (in an `Arc`).
#[derive(Debug)]
pub struct Acl {
    users: RwLock<Arc<Users>>,
    version: AtomicU64,
    next_identity: AtomicU64,
    log: Mutex<AclLog>,
}

impl Default for Acl {
    fn default() -> Acl {
        Acl {
            users: RwLock::new(Arc::new(Users::with_default(0))),
            version: AtomicU64::new(0),
            next_identity: AtomicU64::new(1),
            log: Mutex::default(),
        }
    }
}

impl Acl {
    /// The version of the users: it moves with every change.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The current users.
    pub fn users(&self) -> Arc<Users> {
        self.users
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// A fresh identity for a user made anew.
    pub fn new_identity(&self) -> u64 {
        self.next_identity.fetch_add(1, Ordering::Relaxed)
    }

    /// Changes the users with `change` (all or nothing: an `Err` leaves them as they were).
    pub fn update<T, E>(&self, change: impl FnOnce(&mut Users) -> Result<T, E>) -> Result<T, E> {
        let mut guard = self
            .users
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut users = Users::clone(&guard);
        let out = change(&mut users)?;
        *guard = Arc::new(users);
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(out)
    }

    /// The default user's password from `requirepass` (empty: `nopass`), as Redis sets it at
    /// start and on CONFIG SET.
    pub fn set_requirepass(&self, password: &[u8]) {
        let _ = self.update(|users| -> Result<(), RuleError> {
            let mut user = User::clone(users.default_user());
            user.apply(b"resetpass", false)?;
            if password.is_empty() {
                user.apply(b"nopass", false)?;
            } else {
                let mut rule = b">".to_vec();
                rule.extend_from_slice(password);
                user.apply(&rule, false)?;
            }
            users.map.insert(user.name.clone(), Arc::new(user));
            Ok(())
        });
    }

    pub fn log(&self) -> std::sync::MutexGuard<'_, AclLog> {
        self.log
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_are_all_or_nothing_and_move_the_version() {
        let acl = Acl::default();
        let before = acl.version();
        let failed: Result<(), ()> = acl.update(|users| {
            users.map.clear();
            Err(())
        });
        assert!(failed.is_err() && acl.version() == before);
        assert_eq!(acl.users().map.len(), 1);
        acl.set_requirepass(b"secret");
        assert!(acl.version() > before);
        let default = acl.users().default_user().clone();
        assert!(default.authenticates(b"secret") && !default.nopass);
        acl.set_requirepass(b"");
        assert!(acl.users().default_user().nopass);
    }
}
