#!/usr/bin/env bash
# The cost of the ACL check: corewire-kv (1 shard) on SERVER_CPU (0), redis-benchmark on
# CLIENT_CPU (1), SET and GET at -P 16 as the default user (every command and key: the check
# is skipped) and as a restricted user (`+get +set` and key patterns, so every request is
# checked: command bitmap, key spec, pattern match). Server CPU per request (utime+stime from
# /proc/PID/stat around each run) and requests/s; medians of ROUNDS interleaved rounds.
#
# With --baseline BIN a second corewire-kv (another build, e.g. before a change) serves on
# its own port beside the first, and every round runs both, interleaved: a table per binary.
#
# Usage: examples/kv/bench/acl.sh [--requests N (2000000)] [--rounds R (5)] [--clients C (50)]
#            [--baseline BIN] [--quick] [--no-build]   --quick = --requests 20000 --rounds 1
# Environment: SERVER_CPU (0), CLIENT_CPU (1), COREWIRE_KV (path; default: build, release).
set -euo pipefail

requests=2000000
rounds=5
clients=50
build=1
baseline=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --requests) requests="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --baseline) baseline="$2"; shift 2 ;;
        --quick) requests=20000; rounds=1; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
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

[[ -z "$baseline" || -x "$baseline" ]] || { echo "acl.sh: $baseline missing" >&2; exit 1; }

work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

tck="$(getconf CLK_TCK)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts BIN as server NAME: its pid and port in $work/NAME.{pid,port}.
start_server() {
    local name="$1" bin="$2" port
    port="$(free_port)"
    taskset -c "$server_cpu" "$bin" --shards 1 --port "$port" >"$work/$name.log" 2>&1 &
    pids+=($!)
    echo $! >"$work/$name.pid"
    echo "$port" >"$work/$name.port"
    for _ in $(seq 1 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    # redis-benchmark's keys are key:NNNNNNNNNNNN; it asks CONFIG GET at start.
    redis-cli -p "$port" ACL SETUSER bench on '>bench' -@all +get +set +ping +config\|get \
        '~counter:*' '~other:*' '~key:*' >/dev/null
}

servers=(candidate)
start_server candidate "$kv"
if [[ -n "$baseline" ]]; then
    servers+=(baseline)
    start_server baseline "$baseline"
fi

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# One run against server NAME: "rps cpu_us_per_request".
bench_once() {
    local name="$1" t="$2" auth="$3" pid port before after csv
    pid="$(cat "$work/$name.pid")"
    port="$(cat "$work/$name.port")"
    before="$(cpu_ticks "$pid")"
    # shellcheck disable=SC2086 # auth flags are split on purpose
    csv="$(taskset -c "$client_cpu" redis-benchmark -p "$port" -t "$t" -n "$requests" \
        -r 100000 -c "$clients" -P 16 $auth --csv 2>/dev/null | tail -n 1)"
    after="$(cpu_ticks "$pid")"
    echo "$csv" | awk -F'"' -v b="$before" -v a="$after" -v tk="$tck" -v n="$requests" \
        '{ printf "%s %.4f\n", $4, (a - b) / tk / n * 1e6 }'
}

for round in $(seq 1 "$rounds"); do
    for name in "${servers[@]}"; do
        for t in set get; do
            for who in default restricted; do
                auth=""
                [[ $who == restricted ]] && auth="--user bench -a bench"
                line="$(bench_once "$name" "$t" "$auth")"
                echo "$line" >>"$work/runs.$name.$who.$t"
                echo "  round $round $name $who ${t^^}: $line" >&2
            done
            # This round's ratio, for the median of per-round ratios.
            awk -v r="$(tail -n 1 "$work/runs.$name.restricted.$t" | cut -d' ' -f2)" \
                -v d="$(tail -n 1 "$work/runs.$name.default.$t" | cut -d' ' -f2)" \
                'BEGIN { if (d > 0) printf "%.4f\n", r / d }' >>"$work/ratios.$name.$t"
        done
    done
done

col() { awk -v c="$1" '{ print $c }' "$2" | median; }
for name in "${servers[@]}"; do
    bin="$kv"
    [[ $name == baseline ]] && bin="$baseline"
    echo "## ACL check cost: corewire-kv (1 shard), -P 16, $clients clients, $requests requests, medians of $rounds rounds"
    [[ -n "$baseline" ]] && echo "## $name: $bin"
    echo
    echo "| test | default rps | restricted rps | default CPU µs/req | restricted CPU µs/req | CPU ratio | median of per-round ratios |"
    echo "|---|---|---|---|---|---|---|"
    for t in set get; do
        d="$work/runs.$name.default.$t"; r="$work/runs.$name.restricted.$t"
        printf "| %s | %.0f | %.0f | %s | %s | %s | %s |\n" "${t^^}" "$(col 1 "$d")" "$(col 1 "$r")" \
            "$(col 2 "$d")" "$(col 2 "$r")" \
            "$(awk -v a="$(col 2 "$r")" -v b="$(col 2 "$d")" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }')" \
            "$(median <"$work/ratios.$name.$t")"
    done
    echo
done
