//! The commands ACL rules name: every Redis 7.0 command and subcommand from the generated
//! table, each with a small id (its bit in a selector's bitmap) and its categories.

use std::sync::OnceLock;

use foldhash::HashMap;

use super::keys::{ChannelPlan, KeyPlan};
use crate::introspect::meta::Meta;

/// Redis 7.0's categories, in its order (`ACL CAT`).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of category `name` (without its `@`), case-insensitively.
pub fn category_bit(name: &str) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// One command or `container|subcommand`.
#[derive(Debug)]
pub(crate) struct Entry {
    pub meta: &'static Meta,
    pub categories: u32,
    /// Flagged `no_auth` (AUTH, HELLO, ...): every user may run it.
    pub no_auth: bool,
    /// The container's id, for a subcommand.
    pub parent: Option<usize>,
    /// The subcommands' ids, for a container.
    pub children: Vec<usize>,
    /// How a request's keys are found.
    pub keys: KeyPlan,
    /// Whether a request names channels.
    pub channels: ChannelPlan,
}

impl Entry {
    pub fn name(&self) -> &'static str {
        self.meta.name
    }
}

#[derive(Debug)]
pub(crate) struct Catalog {
    pub entries: Vec<Entry>,
    by_name: HashMap<&'static str, usize>,
}

impl Catalog {
    /// The node-wide catalog, built once.
    pub fn get() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(Catalog::build)
    }

    fn build() -> Catalog {
        let mut entries = Vec::new();
        let categories = |meta: &Meta| {
            meta.acl
                .iter()
                .filter_map(|c| category_bit(c.trim_start_matches('@')))
                .fold(0, |acc, bit| acc | bit)
        };
        for meta in crate::introspect::meta::all() {
            let id = entries.len();
            entries.push(Entry {
                meta,
                categories: categories(meta),
                no_auth: meta.has_flag("no_auth"),
                parent: None,
                children: Vec::new(),
                keys: KeyPlan::of(meta),
                channels: ChannelPlan::of(meta.name),
            });
            for sub in meta.subcommands {
                let sub_id = entries.len();
                entries.push(Entry {
                    meta: sub,
                    categories: categories(sub),
                    no_auth: sub.has_flag("no_auth"),
                    parent: Some(id),
                    children: Vec::new(),
                    keys: KeyPlan::of(sub),
                    channels: ChannelPlan::of(sub.name),
                });
                entries[id].children.push(sub_id);
            }
        }
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name(), i))
            .collect();
        Catalog { entries, by_name }
    }

    /// The id of `name` (`get`, `config|get`: lowercase, as the tables spell them).
    pub fn id(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The command a request names (`args[0]`, and `args[1]` for a container), as Redis's
    /// `lookupCommand` finds it: `None` for an unknown command or subcommand.
    pub fn resolve(&self, args: &[bytes::Bytes]) -> Option<usize> {
        let name = std::str::from_utf8(args.first()?).ok()?;
        let id = self.lookup(name)?;
        let entry = &self.entries[id];
        if entry.children.is_empty() || args.len() < 2 {
            return Some(id);
        }
        let sub = std::str::from_utf8(&args[1]).ok()?;
        self.lookup(&format!("{}|{sub}", entry.name()))
    }

    /// The id of a name as a user wrote it (any case).
    pub fn lookup(&self, name: &str) -> Option<usize> {
        self.id(&name.to_ascii_lowercase())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The ids of the commands in the categories of `mask`.
    pub fn in_category(&self, mask: u32) -> impl Iterator<Item = usize> + '_ {
        (self.entries.iter().enumerate())
            .filter(move |(_, e)| e.categories & mask != 0)
            .map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_cover_commands_and_subcommands() {
        let catalog = Catalog::get();
        let get = catalog.id("get").unwrap();
        assert_eq!(catalog.entries[get].name(), "get");
        assert!(catalog.entries[get].categories & category_bit("read").unwrap() != 0);
        let config_get = catalog.lookup("CONFIG|GET").unwrap();
        let config = catalog.id("config").unwrap();
        assert_eq!(catalog.entries[config_get].parent, Some(config));
        assert!(catalog.entries[config].children.contains(&config_get));
        assert!(catalog.id("nope").is_none());
        let string = category_bit("string").unwrap();
        assert!(catalog.in_category(string).any(|id| id == get));
    }
}
