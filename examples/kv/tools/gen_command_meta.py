#!/usr/bin/env python3
"""Generates src/introspect/commands_generated.rs from Redis 7.0's command descriptions.

usage: tools/gen_command_meta.py REDIS_SRC_COMMANDS_DIR > src/introspect/commands_generated.rs

REDIS_SRC_COMMANDS_DIR is `src/commands` of the redis repository at tag 7.0.15 (one JSON file
per command and subcommand). What COMMAND, COMMAND INFO, COMMAND DOCS, COMMAND LIST and
COMMAND GETKEYS report comes from here: arity, flags (with `movablekeys` derived from the key
specs as Redis's populateCommandLegacyRangeSpec derives it), ACL categories (with the implicit
ones of setImplicitACLCategories), tips, key specs, the legacy (first, last, step) range,
documentation and arguments. Sentinel-only commands are left out. The output is committed;
nothing here runs at build time.
"""

import glob
import json
import os
import sys

# addReplyFlagsForCommand's order; the hidden ones are dropped.
COMMAND_FLAGS = [
    "WRITE", "READONLY", "DENYOOM", "MODULE", "ADMIN", "PUBSUB", "NOSCRIPT", "BLOCKING",
    "LOADING", "STALE", "SKIP_MONITOR", "SKIP_SLOWLOG", "ASKING", "FAST", "NO_AUTH",
    "NO_MANDATORY_KEYS", "NO_ASYNC_LOADING", "NO_MULTI", "MOVABLE_KEYS", "ALLOW_BUSY",
]
REPLY_NAME = {"MOVABLE_KEYS": "movablekeys"}
# acl.c's ACLCommandCategories order.
ACL_ORDER = [
    "KEYSPACE", "READ", "WRITE", "SET", "SORTEDSET", "LIST", "HASH", "STRING", "BITMAP",
    "HYPERLOGLOG", "GEO", "STREAM", "PUBSUB", "ADMIN", "FAST", "SLOW", "BLOCKING", "DANGEROUS",
    "CONNECTION", "TRANSACTION", "SCRIPTING",
]
KEY_FLAGS = ["RO", "RW", "OW", "RM", "ACCESS", "UPDATE", "INSERT", "DELETE", "NOT_KEY",
             "INCOMPLETE", "VARIABLE_FLAGS"]
KEY_REPLY = {"ACCESS": "access", "UPDATE": "update", "INSERT": "insert", "DELETE": "delete",
             "NOT_KEY": "not_key", "INCOMPLETE": "incomplete", "VARIABLE_FLAGS": "variable_flags"}
GROUPS = {"sorted_set": "sorted-set"}


def rust_str(text):
    if text is None:
        return '""'
    return json.dumps(text, ensure_ascii=False)


def str_list(items):
    return "&[" + ", ".join(rust_str(i) for i in items) + "]"


def implicit_acl(flags, acl):
    acl = set(acl)
    if "WRITE" in flags:
        acl.add("WRITE")
    if "READONLY" in flags and "SCRIPTING" not in acl:
        acl.add("READ")
    if "ADMIN" in flags:
        acl.update(["ADMIN", "DANGEROUS"])
    if "PUBSUB" in flags:
        acl.add("PUBSUB")
    if "FAST" in flags:
        acl.add("FAST")
    if "BLOCKING" in flags:
        acl.add("BLOCKING")
    if "FAST" not in acl:
        acl.add("SLOW")
    return ["@" + c.lower() for c in ACL_ORDER if c in acl]


def legacy_range(specs):
    """populateCommandLegacyRangeSpec: (first, last, step), and whether keys are movable."""
    if not specs:
        return (0, 0, 0), False
    def is_range(spec):
        return "index" in spec["begin_search"] and "range" in spec["find_keys"]
    if len(specs) == 1 and is_range(specs[0]):
        spec = specs[0]
        pos = spec["begin_search"]["index"]["pos"]
        rng = spec["find_keys"]["range"]
        last = rng["lastkey"]
        return (pos, last + pos if last >= 0 else last, rng["step"]), "INCOMPLETE" in spec["flags"]
    movable = False
    first, last, prev_last = None, 0, 0
    for spec in specs:
        if not is_range(spec):
            movable = True
            continue
        pos = spec["begin_search"]["index"]["pos"]
        rng = spec["find_keys"]["range"]
        if rng["step"] != 1 or (prev_last and prev_last != pos - 1):
            movable = True
            continue
        if "INCOMPLETE" in spec["flags"]:
            movable = True
        first = pos if first is None else min(first, pos)
        abs_last = rng["lastkey"] + pos if rng["lastkey"] >= 0 else rng["lastkey"]
        # Redis compares as unsigned: a negative last key is the largest.
        last = abs_last if (abs_last & 0xFFFFFFFF) > (last & 0xFFFFFFFF) else last
        prev_last = last
    if first is None:
        return (0, 0, 0), True
    return (first, last, 1), movable


def key_spec(spec):
    flags = [KEY_REPLY.get(f, f) for f in KEY_FLAGS if f in spec.get("flags", [])]
    bs = spec["begin_search"]
    if "index" in bs and bs["index"] is not None:
        begin = "Begin::Index(%d)" % bs["index"]["pos"]
    elif "keyword" in bs and bs["keyword"] is not None:
        begin = "Begin::Keyword { keyword: %s, startfrom: %d }" % (
            rust_str(bs["keyword"]["keyword"]), bs["keyword"]["startfrom"])
    else:
        begin = "Begin::Unknown"
    fk = spec["find_keys"]
    if "range" in fk and fk["range"] is not None:
        r = fk["range"]
        find = "Find::Range { lastkey: %d, keystep: %d, limit: %d }" % (
            r["lastkey"], r["step"], r["limit"])
    elif "keynum" in fk and fk["keynum"] is not None:
        k = fk["keynum"]
        find = "Find::Keynum { keynumidx: %d, firstkey: %d, keystep: %d }" % (
            k["keynumidx"], k["firstkey"], k["step"])
    else:
        find = "Find::Unknown"
    return "KeySpec { notes: %s, flags: %s, begin: %s, find: %s }" % (
        rust_str(spec.get("notes")), str_list(flags), begin, find)


def argument(arg):
    flags = []
    if arg.get("optional"):
        flags.append("optional")
    if arg.get("multiple"):
        flags.append("multiple")
    if arg.get("multiple_token"):
        flags.append("multiple_token")
    sub = ", ".join(argument(a) for a in arg.get("arguments", [])) \
        if arg["type"] in ("oneof", "block") else ""
    token = arg.get("token")
    # Redis's generator writes the token as a C string literal: `""` is the empty string.
    if token == '""':
        token = ""
    return ("Arg { name: %s, kind: %s, key_spec_index: %d, token: %s, summary: %s, "
            "since: %s, deprecated_since: %s, flags: %s, args: &[%s] }") % (
        rust_str(arg["name"].lower()), rust_str(arg["type"]), arg.get("key_spec_index", -1),
        "None" if token is None else "Some(%s)" % rust_str(token.upper()),
        rust_str(arg.get("summary")),
        rust_str(arg.get("since")), rust_str(arg.get("deprecated_since")), str_list(flags), sub)


def meta(full_name, desc, subcommands):
    flags = list(desc.get("command_flags", []))
    (first, last, step), movable = legacy_range(desc.get("key_specs", []))
    if movable:
        flags.append("MOVABLE_KEYS")
    reply_flags = [REPLY_NAME.get(f, f.lower()) for f in COMMAND_FLAGS if f in flags]
    acl = implicit_acl(flags, desc.get("acl_categories", []))
    tips = [t.lower() for t in desc.get("command_tips", [])]
    history = ", ".join("(%s, %s)" % (rust_str(h[0]), rust_str(h[1]))
                        for h in desc.get("history", []))
    subs = ", ".join(subcommands)
    return ("Meta { name: %s, arity: %d, flags: %s, acl: %s, tips: %s, key_specs: &[%s], "
            "first_key: %d, last_key: %d, key_step: %d, group: %s, summary: %s, since: %s, "
            "complexity: %s, doc_flags: %s, deprecated_since: %s, replaced_by: %s, "
            "history: &[%s], args: &[%s], subcommands: &[%s] }") % (
        rust_str(full_name), desc["arity"], str_list(reply_flags), str_list(acl),
        str_list(tips), ", ".join(key_spec(s) for s in desc.get("key_specs", [])),
        first, last, step, rust_str(GROUPS.get(desc["group"], desc["group"])),
        rust_str(desc.get("summary")), rust_str(desc.get("since")),
        rust_str(desc.get("complexity")),
        str_list([f.lower() for f in desc.get("doc_flags", [])]),
        rust_str(desc.get("deprecated_since")), rust_str(desc.get("replaced_by")),
        history, ", ".join(argument(a) for a in desc.get("arguments", [])), subs)


def main():
    src = sys.argv[1]
    commands, subcommands = {}, {}
    for path in sorted(glob.glob(os.path.join(src, "*.json"))):
        with open(path) as f:
            for name, desc in json.load(f).items():
                if "ONLY_SENTINEL" in desc.get("command_flags", []):
                    continue
                if desc.get("container"):
                    subcommands.setdefault(desc["container"].lower(), {})[name.lower()] = desc
                else:
                    commands[name.lower()] = desc
    out = sys.stdout
    out.write("// @generated by tools/gen_command_meta.py from Redis 7.0.15's src/commands/*.json\n")
    out.write("// (BSD-3, Redis Ltd.); do not edit by hand.\n\n")
    out.write("use super::meta::{Arg, Begin, Find, KeySpec, Meta};\n\n")
    out.write("/// Every Redis 7.0 command but Sentinel's, sorted by name; subcommands sorted too.\n")
    out.write("pub(crate) static COMMANDS: &[Meta] = &[\n")
    for name in sorted(commands):
        subs = [meta("%s|%s" % (name, sub), d, [])
                for sub, d in sorted(subcommands.get(name, {}).items())]
        out.write("    %s,\n" % meta(name, commands[name], subs))
    out.write("];\n")


if __name__ == "__main__":
    main()
