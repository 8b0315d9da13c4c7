//! The ACL file (`aclfile`): one `user NAME rules...` line per user, read whole by ACL LOAD
//! and at start (any error leaves the users as they were, with Redis's messages), written
//! by ACL SAVE; and the `user` lines of the configuration file.

use std::sync::Arc;

use bytes::Bytes;

use super::user::{merge_selector_args, User};
use super::Users;

/// Whether a username is acceptable (no spaces or NUL bytes).
pub fn valid_username(name: &[u8]) -> bool {
    !name.iter().any(|&b| b == b' ' || b == 0)
}

/// The users of an ACL file's text; `Err`: Redis's error text (every problem, then the
/// warning that nothing changed). The default user keeps `default_identity` (its
/// connections stay), every other user gets a fresh one from `identity`; without a default
/// user in the file it is the one Redis creates.
pub fn parse(
    text: &[u8],
    filename: &str,
    allchannels: bool,
    default_identity: u64,
    identity: &mut dyn FnMut() -> u64,
) -> Result<Users, String> {
    let mut users = Users::default();
    let mut errors = String::new();
    for (index, line) in text.split(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        let line = trim(line);
        if line.is_empty() {
            continue;
        }
        let words: Vec<Bytes> = line
            .split(|&b| b == b' ')
            .filter(|w| !w.is_empty())
            .map(Bytes::copy_from_slice)
            .collect();
        if words.len() < 2 || words[0].as_ref() != b"user" {
            errors.push_str(&format!(
                "{filename}:{number} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = words[1].clone();
        if users.map.contains_key(&name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {number}. ",
                String::from_utf8_lossy(&name)
            ));
            continue;
        }
        let id = if name.as_ref() == b"default" {
            default_identity
        } else {
            identity()
        };
        let mut user = User::new(name.clone(), id, allchannels);
        let rules = match merge_selector_args(&words[2..]) {
            Ok(rules) => rules,
            Err(_) => {
                errors.push_str(&format!(
                    "{filename}:{number}: Unmatched parenthesis in selector definition."
                ));
                Vec::new()
            }
        };
        for rule in rules {
            if let Err(why) = user.apply(trim(&rule), allchannels) {
                errors.push_str(&format!(
                    "{filename}:{number}: Error in applying operation '{}': {why}. ",
                    String::from_utf8_lossy(&rule)
                ));
            }
        }
        users.map.insert(name, Arc::new(user));
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was \
             performed",
        );
        return Err(errors);
    }
    users
        .map
        .entry(Bytes::from_static(b"default"))
        .or_insert_with(|| Arc::new(User::default_user(default_identity)));
    Ok(users)
}

fn trim(mut bytes: &[u8]) -> &[u8] {
    while let [b' ' | b'\t' | b'\r' | b'\n', rest @ ..] = bytes {
        bytes = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\r' | b'\n'] = bytes {
        bytes = rest;
    }
    bytes
}

/// ACL SAVE's text: every user's ACL LIST line.
pub fn render(users: &Users) -> Vec<u8> {
    let mut out = Vec::new();
    for user in users.map.values() {
        out.extend_from_slice(&user.describe());
        out.push(b'\n');
    }
    out
}

/// The `user` lines of the configuration file (each: the name then its rules), over the
/// default user set; `Err`: Redis's reason, which stops the server.
pub fn configured(
    lines: &[Vec<String>],
    allchannels: bool,
    identity: &mut dyn FnMut() -> u64,
    base: &Users,
) -> Result<Users, String> {
    let mut users = base.clone();
    let mut seen: Vec<&str> = Vec::new();
    for line in lines {
        let Some((name, rules)) = line.split_first() else {
            continue;
        };
        if seen.contains(&name.as_str()) {
            return Err(
                "Duplicate user found. A user can only be defined once in config files".into(),
            );
        }
        seen.push(name);
        if !valid_username(name.as_bytes()) {
            return Err(format!("Error in user declaration '{name}': Syntax error"));
        }
        let name = Bytes::from(name.clone());
        // The default user is reset first, as Redis does.
        let mut user = match users.map.get(&name) {
            Some(existing) if name.as_ref() == b"default" => {
                let mut user = User::clone(existing);
                let _ = user.apply(b"reset", allchannels);
                user
            }
            _ => User::new(name.clone(), identity(), allchannels),
        };
        let words: Vec<Bytes> = rules.iter().map(|r| Bytes::from(r.clone())).collect();
        let rules = merge_selector_args(&words).map_err(|start| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&start)
            )
        })?;
        for rule in rules {
            user.apply(&rule, allchannels).map_err(|why| {
                format!(
                    "Error in user declaration '{}': {why}",
                    String::from_utf8_lossy(&user.name)
                )
            })?;
        }
        users.map.insert(name, Arc::new(user));
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Users, String> {
        let mut next = 10;
        parse(text.as_bytes(), "u.acl", false, 0, &mut || {
            next += 1;
            next
        })
    }

    #[test]
    fn loads_users_and_adds_the_default_one() {
        let users =
            load("user alice on >alice ~* &* +@all\n\nuser bob on (+get ~r*) nopass\n").unwrap();
        assert_eq!(users.map.len(), 3);
        assert!(users.get(b"alice").unwrap().authenticates(b"alice"));
        assert_eq!(users.get(b"bob").unwrap().selectors.len(), 2);
        assert_eq!(users.default_user().identity, 0);
        let text = String::from_utf8(render(&users)).unwrap();
        assert!(text.ends_with("user default on nopass ~* &* +@all\n"));
        let again = load(&text).unwrap();
        assert_eq!(render(&again), render(&users));
    }

    #[test]
    fn errors_as_redis_reports_them() {
        let error = load(
            "user alice on nopass\nuser alice on\nuser bob on +bogus\nfoo bar\nuser carl (+get\n",
        )
        .unwrap_err();
        assert_eq!(
            error,
            "WARNING: Duplicate user 'alice' found on line 2. u.acl:3: Error in applying \
             operation '+bogus': Unknown command or category name in ACL. u.acl:4 should start \
             with user keyword followed by the username. u.acl:5: Unmatched parenthesis in \
             selector definition.WARNING: ACL errors detected, no change to the previously \
             active ACL rules was performed"
        );
    }

    #[test]
    fn configured_users_and_duplicates() {
        let base = Users::with_default(0);
        let mut next = 1;
        let mut identity = || {
            next += 1;
            next
        };
        let line = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let users = configured(
            &[line("default on nopass ~* +@all -flushdb")],
            false,
            &mut identity,
            &base,
        )
        .unwrap();
        assert!(!users.default_user().root().allchannels);
        let dup = configured(&[line("foo"), line("foo")], false, &mut identity, &base);
        assert!(dup.unwrap_err().contains("Duplicate user"));
    }
}
