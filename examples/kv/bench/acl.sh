#!/usr/bin/env bash
# The cost of the ACL check: corewire-kv (1 shard) on SERVER_CPU (0), redis-benchmark on
# CLIENT_CPU (1), SET and GET at -P 16 as the default user (every command and key: the check
# is skipped) and as a restricted user (`+get +set` and key patterns, so every request is
# checked: command bitmap, key spec, pattern match). Server CPU per request (utime+stime from
# /proc/PID/stat around each run) and requests/s; medians of ROUNDS interleaved rounds.
#
# Usage: examples/kv/bench/acl.sh [--requests N (2000000)] [--rounds R (5)] [--clients C (50)]
#            [--quick] [--no-build]      --quick = --requests 20000 --rounds 1 (smoke run)
# Environment: SERVER_CPU (0), CLIENT_CPU (1), COREWIRE_KV (path; default: build, release).
set -euo pipefail

requests=2000000
rounds=5
clients=50
build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --requests) requests="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --quick) requests=20000; rounds=1; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) echo "acl.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
server_cpu="${SERVER_CPU:-0}"
client_cpu="${CLIENT_CPU:-1}"
for tool in redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "acl.sh: $tool not found (apt-get install redis-tools)" >&2; exit 1; }
done
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=kv-binary.sh
source "$here/kv-binary.sh"
[[ -x "$kv" ]] || { echo "acl.sh: $kv missing" >&2; exit 1; }

work="$(mktemp -d)"
pid=""
cleanup() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

tck="$(getconf CLK_TCK)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
taskset -c "$server_cpu" "$kv" --shards 1 --port "$port" >"$work/kv.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
done
# redis-benchmark's keys are key:NNNNNNNNNNNN; it asks CONFIG GET at start.
redis-cli -p "$port" ACL SETUSER bench on '>bench' -@all +get +set +ping +config\|get \
    '~counter:*' '~other:*' '~key:*' >/dev/null

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# One run: "rps cpu_us_per_request".
bench_once() {
    local t="$1" auth="$2" before after csv
    before="$(cpu_ticks)"
    # shellcheck disable=SC2086 # auth flags are split on purpose
    csv="$(taskset -c "$client_cpu" redis-benchmark -p "$port" -t "$t" -n "$requests" \
        -r 100000 -c "$clients" -P 16 $auth --csv 2>/dev/null | tail -n 1)"
    after="$(cpu_ticks)"
    echo "$csv" | awk -F'"' -v b="$before" -v a="$after" -v tk="$tck" -v n="$requests" \
        '{ printf "%s %.4f\n", $4, (a - b) / tk / n * 1e6 }'
}

for round in $(seq 1 "$rounds"); do
    for t in set get; do
        for who in default restricted; do
            auth=""
            [[ $who == restricted ]] && auth="--user bench -a bench"
            line="$(bench_once "$t" "$auth")"
            echo "$line" >>"$work/runs.$who.$t"
            echo "  round $round $who ${t^^}: $line" >&2
        done
    done
done

col() { awk -v c="$1" '{ print $c }' "$2" | median; }
echo "## ACL check cost: corewire-kv (1 shard), -P 16, $clients clients, $requests requests, medians of $rounds rounds"
echo
echo "| test | default rps | restricted rps | default CPU µs/req | restricted CPU µs/req | CPU ratio |"
echo "|---|---|---|---|---|---|"
for t in set get; do
    d="$work/runs.default.$t"; r="$work/runs.restricted.$t"
    printf "| %s | %.0f | %.0f | %s | %s | %s |\n" "${t^^}" "$(col 1 "$d")" "$(col 1 "$r")" \
        "$(col 2 "$d")" "$(col 2 "$r")" \
        "$(awk -v a="$(col 2 "$r")" -v b="$(col 2 "$d")" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }')"
done
