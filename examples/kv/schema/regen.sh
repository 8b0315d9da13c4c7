#!/usr/bin/env bash
# Regenerates examples/kv/src/binary/kv_generated.rs from kv.fbs.
#
# The generated code must match the `flatbuffers` runtime crate (25.12.19), so
# this needs flatc 25.12.19 exactly (Debian's flatc 2.0.8 does NOT match); see
# wire/schema/regen.sh for how to get one. The normal cargo build never
# runs this: the output is committed.
#
# Usage: examples/kv/schema/regen.sh            (uses $FLATC, else /work/tools/flatc)
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
"$flatc" --rust -o "$out" "$here/kv.fbs"
install -m 644 "$out/kv_generated.rs" "$here/../src/binary/kv_generated.rs"
echo "wrote $here/../src/binary/kv_generated.rs"
