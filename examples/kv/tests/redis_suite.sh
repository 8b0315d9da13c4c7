#!/usr/bin/env bash
# Runs Redis's own test suite (a copy of Redis 7.0's tests/ with a run-external.sh runner,
# kept outside this repository) in external-server mode against corewire-kv and against
# redis-server on this machine, and prints each unit's counts side by side.
#
# Usage: examples/kv/tests/redis_suite.sh SUITE_DIR [--shards N[,N...]] [--no-redis] [UNIT...]
#   SUITE_DIR   folder holding run-external.sh (the suite stays out of this repository)
#   --shards    corewire-kv shard counts to run, each as its own server (default: 1,4)
#   --no-redis  skip redis-server (its counts are in SUITE_DIR's README)
#   UNIT...     units as run-external.sh names them (default: its default list). Units whose
#               tests start servers of their own (pubsubshard, info, limits, networking,
#               auth: run-external.sh runs nothing of them) go to redis_suite_servers.sh,
#               which starts corewire-kv with each unit's configuration file instead.
# Environment: COREWIRE_KV (binary; default: cargo build --release, then target/release),
# COREWIRE_KV_ARGS (extra flags for corewire-kv), KEEP_LOGS=DIR (each unit's log, per server).
# Needs tclsh (apt-get install tcl) and redis-server. Exit status 1 when a unit aborted on
# corewire-kv.
set -euo pipefail

suite="${1:?usage: redis_suite.sh SUITE_DIR [--shards N[,N...]] [--no-redis] [UNIT...]}"
shift
[[ -x "$suite/run-external.sh" ]] || { echo "redis_suite.sh: no run-external.sh in $suite" >&2; exit 2; }
shard_counts=(1 4)
with_redis=1
units=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --shards) IFS=, read -r -a shard_counts <<<"$2"; shift 2 ;;
        --no-redis) with_redis=0; shift ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) units+=("$1"); shift ;;
    esac
done
command -v tclsh >/dev/null || { echo "redis_suite.sh: tclsh missing (apt-get install tcl)" >&2; exit 2; }
# No units named: run-external.sh's default list.
if [[ ${#units[@]} -eq 0 ]]; then
    mapfile -t units < <(sed -n '/|| units=(/,/)$/p' "$suite/run-external.sh" | grep -oE 'unit/[A-Za-z0-9/_-]+')
fi
# The units that start their own servers.
own=()
external=()
for u in "${units[@]}"; do
    case "$u" in
        unit/pubsubshard|unit/info|unit/limits|unit/networking|unit/auth|unit/acl|unit/acl-v2) own+=("$u") ;;
        *) external+=("$u") ;;
    esac
done
units=("${external[@]}")
if [[ $with_redis == 1 ]]; then
    command -v redis-server >/dev/null || { echo "redis_suite.sh: redis-server missing (apt-get install redis-server)" >&2; exit 2; }
fi

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
kv="${COREWIRE_KV:-}"
if [[ -z "$kv" ]]; then
    (cd "$repo" && cargo build --release -q -p corewire-kv --bin corewire-kv >&2)
    kv="${CARGO_TARGET_DIR:-$repo/target}/release/corewire-kv"
fi
[[ -x "$kv" ]] || { echo "redis_suite.sh: $kv missing" >&2; exit 2; }

work="$(mktemp -d)"
server_pid=""
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# Starts a server (its command in "$@", with PORT replaced by a free port) and waits until it
# answers PING; sets server_pid and server_port.
start_server() {
    local tries=0
    while :; do
        server_port=$(( 20000 + RANDOM % 10000 ))
        ss -ltn "sport = :$server_port" | grep -q LISTEN && continue
        local args=("${@//PORT/$server_port}")
        "${args[@]}" >"$work/server.out" 2>&1 &
        server_pid=$!
        for _ in $(seq 100); do
            redis-cli -p "$server_port" ping 2>/dev/null | grep -q PONG && return 0
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true
        server_pid=""
        tries=$((tries + 1))
        [[ $tries -lt 5 ]] || { cat "$work/server.out" >&2; echo "redis_suite.sh: server did not start" >&2; exit 2; }
    done
}

stop_server() {
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

# Runs the units against the server started with "$@"; writes "unit ok err exc first" lines
# to $work/NAME.counts.
run_units() {
    local name="$1"; shift
    local logs="$work/logs/$name"
    mkdir -p "$logs"
    : >"$work/$name.out"
    local u try
    for u in "${units[@]}"; do
        # A fresh server per unit: a failed test can leave settings behind (a maxmemory it
        # would have reset) that would fail the next unit for a reason of its own.
        start_server "$@"
        # One unit at a time: the test framework listens on a fixed port of its own, which
        # another run on this machine may hold for a while; such a start is retried.
        for try in 1 2 3 4 5 6 7 8 9 10; do
            KEEP_LOGS="$logs" "$suite/run-external.sh" "$server_port" "$u" >"$work/unit.out" 2>&1 || true
            grep -q "couldn't open socket" "$logs/$(basename "$u").log" 2>/dev/null || break
            echo "redis_suite.sh: $u: the test framework's port is busy (try $try), waiting" >&2
            sleep $(( 10 + RANDOM % 20 ))
        done
        grep -E '^[^ ]+ +ok ' "$work/unit.out" >>"$work/$name.out" || true
        stop_server
    done
    if [[ -n "${KEEP_LOGS:-}" ]]; then mkdir -p "$KEEP_LOGS/$name"; cp "$logs"/* "$KEEP_LOGS/$name/" 2>/dev/null || true; fi
    # run-external.sh prints: UNIT ok N  err N  exc N  FIRST-FAILURE. A unit that hit the
    # test framework's timeout ([TIMEOUT], which it does not count) aborted too.
    local line unit rest timeouts
    : >"$work/$name.counts"
    while read -r line; do
        unit=$(awk '{ print $1 }' <<<"$line")
        timeouts=$(sed 's/\x1b\[[0-9;]*m//g' "$logs/$(basename "$unit").log" 2>/dev/null | grep -c '^\[TIMEOUT\]' || true)
        # A unit that ran no test at all did not run: aborted too.
        rest=$(awk -v t="${timeouts:-0}" '{ first = ""; for (i = 8; i <= NF; i++) first = first $i " ";
                   exc = $7 + t; if ($3 + $5 + exc == 0) exc = 1;
                   print $1, $3, $5, exc, first }' <<<"$line")
        echo "$rest" >>"$work/$name.counts"
    done < <(awk '$2 == "ok"' "$work/$name.out")
}

servers=()
if [[ ${#units[@]} -eq 0 ]]; then
    :
elif [[ $with_redis == 1 ]]; then
    run_units redis redis-server --port PORT --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$work" --daemonize no --protected-mode no
    servers+=(redis)
fi
for n in "${shard_counts[@]}"; do
    [[ ${#units[@]} -gt 0 ]] || break
    # shellcheck disable=SC2086 # COREWIRE_KV_ARGS is a list of flags
    run_units "kv$n" "$kv" --port PORT --shards "$n" ${COREWIRE_KV_ARGS:-}
    servers+=("kv$n")
done

# The side-by-side table: ok/err/exc per server, then corewire's first failure per unit.
status=0
[[ ${#servers[@]} -gt 0 ]] && {
    printf '%-28s' unit
    for s in "${servers[@]}"; do printf '%16s' "$s ok/err/exc"; done
    printf '\n'
    mapfile -t unit_list < <(awk '{ print $1 }' "$work/${servers[0]}.counts")
    for u in "${unit_list[@]}"; do
        printf '%-28s' "$u"
        for s in "${servers[@]}"; do
            read -r ok err exc < <(awk -v u="$u" '$1 == u { print $2, $3, $4 }' "$work/$s.counts")
            printf '%16s' "${ok:-?}/${err:-?}/${exc:-?}"
            [[ $s != redis && "${exc:-1}" != 0 ]] && status=1
        done
        printf '\n'
    done
    for s in "${servers[@]}"; do
        [[ $s == redis ]] && continue
        awk -v s="$s" '$5 != "" { $2 = $3 = $4 = ""; print s ": first failure in " $0 }' "$work/$s.counts"
        printf '%s total: ' "$s"; awk '{ ok += $2; err += $3; exc += $4 }
            END { printf "ok %d, err %d, aborted units %d\n", ok, err, exc }' "$work/$s.counts"
    done
    if [[ $with_redis == 1 ]]; then
        printf 'redis total: '; awk '{ ok += $2; err += $3; exc += $4 }
            END { printf "ok %d, err %d, aborted units %d\n", ok, err, exc }' "$work/redis.counts"
    fi
}
if [[ ${#own[@]} -gt 0 ]]; then
    redis_flag=()
    [[ $with_redis == 1 ]] && redis_flag=(--redis)
    COREWIRE_KV="$kv" "$here/redis_suite_servers.sh" "$suite" \
        --shards "$(IFS=,; echo "${shard_counts[*]}")" "${redis_flag[@]}" "${own[@]}" || status=1
fi
exit $status
