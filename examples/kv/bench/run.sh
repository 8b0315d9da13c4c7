#!/usr/bin/env bash
# corewire-kv vs redis-server under redis-benchmark, same client load, on loopback.
#
# For each server and each test (SET, GET) x pipeline depth (-P 16, -P 1) it runs
#   redis-benchmark -p PORT -t TEST -n N -r KEYSPACE -c CLIENTS -P DEPTH -d 3 --csv
# ROUNDS times and reports medians of: requests/s, p50 and p99 latency (redis-benchmark's CSV),
# and the server's CPU seconds per million requests (utime+stime from /proc/PID/stat, read
# before and after each run). Then the same with persistence: corewire `--aof --fsync
# everysec` vs `redis-server --appendonly yes --appendfsync everysec`.
#
# Usage: examples/kv/bench/run.sh [--requests N] [--rounds R] [--shards S] [--clients C]
#                                 [--keyspace K] [--quick] [--no-persistence] [--no-build]
#                                 [--kv-args "EXTRA corewire-kv ARGS"]
#   --quick = --requests 200000 --rounds 3
#   --percore [ARGS]  per-core run instead: runs percore.sh ARGS (1 shard vs
#                     redis-server on CPU 0, redis-benchmark on CPU 1, full default test list at
#                     -P 1 and -P 16, memory per key/element per type); see percore.sh --help
#   --cluster [ARGS]  3-node cluster run instead: runs cluster.sh ARGS
# Needs redis-tools and redis-server (apt-get install redis-tools redis-server).
set -euo pipefail

requests=1000000
rounds=5
shards=2
clients=50
keyspace=100000
persistence=1
build=1
kv_args=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --percore) shift; exec "$(dirname "$0")/percore.sh" "$@" ;;
        --cluster) shift; exec "$(dirname "$0")/cluster.sh" "$@" ;;
        --requests) requests="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --shards) shards="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --keyspace) keyspace="$2"; shift 2 ;;
        --quick) requests=200000; rounds=3; shift ;;
        --no-persistence) persistence=0; shift ;;
        --no-build) build=0; shift ;;
        --kv-args) kv_args="$2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

for tool in redis-benchmark redis-server; do
    if ! command -v "$tool" >/dev/null; then
        echo "run.sh: $tool not found: apt-get install redis-tools redis-server" >&2
        exit 1
    fi
done

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
kv="$target/release/corewire-kv"
if [[ $build == 1 ]]; then
    (cd "$repo" && cargo build --release -p corewire-kv --bin corewire-kv >&2)
fi
[[ -x "$kv" ]] || { echo "run.sh: $kv missing (build it or set CARGO_TARGET_DIR)" >&2; exit 1; }

work="$(mktemp -d)"
declare -A pid port
cleanup() {
    for name in "${!pid[@]}"; do
        kill "${pid[$name]}" 2>/dev/null || true
        wait "${pid[$name]}" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

tck="$(getconf CLK_TCK)"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_for_port() {
    for _ in $(seq 1 100); do
        if redis-cli -p "$1" ping >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    echo "run.sh: server on port $1 did not come up" >&2
    exit 1
}

declare -A commands
# start_server NAME MODE: starts it, records pid[NAME], port[NAME], commands[NAME.MODE]
start_server() {
    local name="$1" mode="$2" cmd
    port[$name]="$(free_port)"
    rm -rf "$work/$name-data"; mkdir -p "$work/$name-data"
    if [[ $name == corewire ]]; then
        # shellcheck disable=SC2206 # word splitting of the extra arguments is intended
        cmd=("$kv" --shards "$shards" --port "${port[$name]}" $kv_args)
        [[ $mode == aof ]] && cmd+=(--aof "$work/$name-data" --fsync everysec)
    else
        cmd=(redis-server --port "${port[$name]}" --save "''" --dir "$work/$name-data")
        if [[ $mode == aof ]]; then
            cmd+=(--appendonly yes --appendfsync everysec)
        else
            cmd+=(--appendonly no)
        fi
    fi
    commands[$name.$mode]="${cmd[*]}"
    # `--save ''` is quoted for display; the server gets an empty argument.
    local argv=("${cmd[@]}")
    for i in "${!argv[@]}"; do [[ ${argv[$i]} == "''" ]] && argv[$i]=""; done
    "${argv[@]}" >"$work/$name.log" 2>&1 &
    pid[$name]=$!
    wait_for_port "${port[$name]}"
}

stop_server() {
    kill "${pid[$1]}" 2>/dev/null || true
    wait "${pid[$1]}" 2>/dev/null || true
    unset "pid[$1]"
}

# One run against NAME: prints "rps p50 p99 cpu_s_per_mreq".
bench_once() {
    local name="$1" test="$2" pipeline="$3"
    local before after csv
    before="$(cpu_ticks "${pid[$name]}")"
    csv="$(redis-benchmark -p "${port[$name]}" -t "$test" -n "$requests" -r "$keyspace" \
        -c "$clients" -P "$pipeline" -d 3 --csv 2>/dev/null | tail -n 1)"
    after="$(cpu_ticks "${pid[$name]}")"
    # "SET","123456.78","0.123","0.010","0.111","0.200","0.300","1.000"
    echo "$csv" | awk -F'"' -v b="$before" -v a="$after" -v t="$tck" -v n="$requests" \
        '{ printf "%s %s %s %.3f\n", $4, $10, $14, (a - b) / t / (n / 1e6) }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A result
tests=(set get)
pipelines=(16 1)
names=(redis corewire)
modes=(mem)
[[ $persistence == 1 ]] && modes+=(aof)

# Both servers run side by side and every round measures them back to back, so load from
# anything else on the machine hits both alike.
for mode in "${modes[@]}"; do
    for name in "${names[@]}"; do start_server "$name" "$mode"; done
    for round in $(seq 1 "$rounds"); do
        for pipeline in "${pipelines[@]}"; do
            for test in "${tests[@]}"; do
                for name in "${names[@]}"; do
                    line="$(bench_once "$name" "$test" "$pipeline")"
                    echo "$line" >>"$work/runs.$mode.$name.$test.$pipeline"
                    echo "  round $round $mode $name ${test^^} -P $pipeline: $line" >&2
                done
            done
        done
    done
    for name in "${names[@]}"; do stop_server "$name"; done
    for name in "${names[@]}"; do
        for pipeline in "${pipelines[@]}"; do
            for test in "${tests[@]}"; do
                for col in 1 2 3 4; do
                    result[$mode.$name.$test.$pipeline.$col]="$(awk -v c=$col '{print $c}' \
                        "$work/runs.$mode.$name.$test.$pipeline" | median)"
                done
            done
        done
    done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo "## corewire-kv vs redis-server ($(redis-server --version | awk '{print $3}'))"
echo
echo "$(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); medians of $rounds rounds;"
echo "$requests requests per run, $clients clients, keyspace $keyspace, 3-byte values."
echo
echo "| persistence | test | -P | redis rps | corewire rps | ratio | redis p50/p99 ms | corewire p50/p99 ms | redis CPU s/Mreq | corewire CPU s/Mreq | CPU ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for mode in "${modes[@]}"; do
    label=$([[ $mode == aof ]] && echo "AOF everysec" || echo "none")
    for pipeline in "${pipelines[@]}"; do
        for test in "${tests[@]}"; do
            r="$mode.redis.$test.$pipeline"; c="$mode.corewire.$test.$pipeline"
            printf "| %s | %s | %s | %.0f | %.0f | %s | %s / %s | %s / %s | %s | %s | %s |\n" \
                "$label" "${test^^}" "$pipeline" \
                "${result[$r.1]}" "${result[$c.1]}" "$(ratio "${result[$c.1]}" "${result[$r.1]}")" \
                "${result[$r.2]}" "${result[$r.3]}" "${result[$c.2]}" "${result[$c.3]}" \
                "${result[$r.4]}" "${result[$c.4]}" "$(ratio "${result[$c.4]}" "${result[$r.4]}")"
        done
    done
done
echo
echo "Commands (ports and directories vary per run):"
echo
for mode in "${modes[@]}"; do
    for name in "${names[@]}"; do
        echo "    ${commands[$name.$mode]}"
    done
done
echo "    redis-benchmark -p PORT -t set|get -n $requests -r $keyspace -c $clients -P 16|1 -d 3 --csv"
