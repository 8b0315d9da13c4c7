#!/usr/bin/env bash
# Runs the units of Redis's own test suite that start servers of their own (pubsubshard,
# info, limits, networking, auth...: run-external.sh runs nothing of them) with corewire-kv
# standing in for redis-server: a copy of the suite gets a `src/redis-server` that starts
# corewire-kv with the unit's configuration file (tests/assets/default.conf plus the unit's
# overrides, Redis's format; its unix socket too) and with `save ""` (it writes no RDB
# snapshots), and its log (stderr) joined to its stdout, where Redis logs without a logfile
# and where the suite looks for log lines; `src/redis-cli` is this host's redis-cli (tests
# that talk over the unix socket use it). Prints each unit's counts per server.
#
# Usage: examples/kv/tests/redis_suite_servers.sh SUITE_DIR [--shards N[,N...]] [--redis] [UNIT...]
#   SUITE_DIR   folder holding Redis 7.0's tests/ and runtest (kept out of this repository)
#   --shards    corewire-kv shard counts to run (default: 1,4)
#   --redis     run the units against redis-server too (the reference counts)
#   UNIT...     units (default: unit/pubsubshard unit/info)
# Environment: COREWIRE_KV (binary; default: cargo build --release, then target/release),
# KEEP_LOGS=DIR (each unit's log), BASEPORT (first port the suite uses; default 21111).
# RUNTEST_ARGS: extra arguments for runtest, e.g. `--skiptest NAME` for a test that needs a
# command corewire-kv lacks (it aborts the rest of its unit), given to every server alike.
# Needs tclsh (apt-get install tcl). Exit status 1 when a unit aborted on corewire-kv.
set -euo pipefail

suite="${1:?usage: redis_suite_servers.sh SUITE_DIR [--shards N[,N...]] [--redis] [UNIT...]}"
shift
[[ -x "$suite/runtest" ]] || { echo "redis_suite_servers.sh: no runtest in $suite" >&2; exit 2; }
shard_counts=(1 4)
with_redis=0
units=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --shards) IFS=, read -r -a shard_counts <<<"$2"; shift 2 ;;
        --redis) with_redis=1; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) units+=("$1"); shift ;;
    esac
done
[[ ${#units[@]} -gt 0 ]] || units=(unit/pubsubshard unit/info)
command -v tclsh >/dev/null || { echo "redis_suite_servers.sh: tclsh missing (apt-get install tcl)" >&2; exit 2; }

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
kv="${COREWIRE_KV:-}"
if [[ -z "$kv" ]]; then
    (cd "$repo" && cargo build --release -q -p corewire-kv --bin corewire-kv >&2)
    kv="${CARGO_TARGET_DIR:-$repo/target}/release/corewire-kv"
fi
[[ -x "$kv" ]] || { echo "redis_suite_servers.sh: $kv missing" >&2; exit 2; }
# The wrapper runs from a copy of the suite: a relative path would not find the binary there.
kv="$(realpath "$kv")"

read -r -a extra <<<"${RUNTEST_ARGS:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$suite/." "$work/"
mkdir -p "$work/src" "$work/tests/tmp"
if command -v redis-cli >/dev/null; then ln -sf "$(command -v redis-cli)" "$work/src/redis-cli"; fi

# src/redis-server for corewire-kv with `$1` shards.
kv_wrapper() {
    rm -f "$work/src/redis-server"
    {
        echo '#!/usr/bin/env bash'
        echo '# corewire-kv in place of redis-server (see redis_suite_servers.sh).'
        echo "exec \"$kv\" \"\$@\" --save \"\" --shards $1 2>&1"
    } >"$work/src/redis-server"
    chmod +x "$work/src/redis-server"
}

servers=()
if [[ $with_redis == 1 ]]; then
    command -v redis-server >/dev/null || { echo "redis_suite_servers.sh: redis-server missing (apt-get install redis-server)" >&2; exit 2; }
    servers+=(redis)
fi
for shards in "${shard_counts[@]}"; do servers+=("kv$shards"); done

status=0
for server in "${servers[@]}"; do
    if [[ $server == redis ]]; then
        rm -f "$work/src/redis-server"
        ln -s "$(command -v redis-server)" "$work/src/redis-server"
    else
        kv_wrapper "${server#kv}"
    fi
    for unit in "${units[@]}"; do
        log="$work/$(basename "$unit").$server.log"
        (cd "$work" && timeout 900 ./runtest --singledb --ignore-encoding --ignore-digest \
            --tags -needs:debug --tags -needs:repl --tags -needs:save \
            --baseport "${BASEPORT:-21111}" --single "$unit" --clients 1 --timeout 60 \
            "${extra[@]}" \
            >"$log" 2>&1) || true
        clean=$(sed 's/\x1b\[[0-9;]*m//g' "$log")
        ok=$(grep -cE '^\[ok\]' <<<"$clean" || true)
        err=$(grep -cE '^\[err\]' <<<"$clean" || true)
        exc=$(grep -cE '^\[(exception|timeout|TIMEOUT)\]' <<<"$clean" || true)
        first=$(grep -m1 -E '^\[(err|exception|timeout|TIMEOUT)\]' <<<"$clean" | cut -c1-150 || true)
        printf '%-6s %-24s ok %3d  err %2d  exc %d  %s\n' "$server" "$unit" "$ok" "$err" "$exc" "$first"
        [[ "$exc" -eq 0 || $server == redis ]] || status=1
        if [[ -n "${KEEP_LOGS:-}" ]]; then mkdir -p "$KEEP_LOGS"; cp "$log" "$KEEP_LOGS/"; fi
    done
done
exit $status
