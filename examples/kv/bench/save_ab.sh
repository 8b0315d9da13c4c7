#!/usr/bin/env bash
# BGSAVE of two corewire-kv builds on the same data, rounds interleaved (so host noise hits
# both alike): each round, each build saves three times: with repl_probe.py's GET client at
# depth 1 sending back to back (a build that answers sooner gets more GETs), with the same
# client at GET_RATE (1000) GETs a second (the same work for both), and alone (INFO polled
# every 5 ms). One shard
# each on SERVER_CPU (0), clients on CLIENT_CPU (1); the keys as in replication.sh. Prints
# one JSON line per save (with INFO's `rdb_last_save_walk` where the build has it) and the
# medians.
#
# With --free-cpu the servers are not confined to SERVER_CPU: their shard is pinned there
# (`--pin yes`, so SERVER_CPU must be 0) and the rest of the process (io_uring's kernel
# workers, which write the file) may use the other CPU, as a deployment with a CPU no shard
# uses does.
#
# Usage: examples/kv/bench/save_ab.sh BASE_BINARY NEW_BINARY [--keys N (1000000)] [--rounds R (5)] [--free-cpu]
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,9p' "$0"; exit 2; }
declare -A bin=([base]="$1" [new]="$2")
shift 2
keys=1000000
rounds=5
free_cpu=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --keys) keys="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --free-cpu) free_cpu=1; shift ;;
        *) echo "save_ab.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
server_cpu="${SERVER_CPU:-0}"
client_cpu="${CLIENT_CPU:-1}"
get_rate="${GET_RATE:-1000}"
here="$(cd "$(dirname "$0")" && pwd)"
probe=(taskset -c "$client_cpu" python3 "$here/repl_probe.py")
work="$(mktemp -d)"
declare -A pid port
cleanup() {
    for p in "${pid[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
up() { until [[ "$(redis-cli -p "$1" dbsize 2>/dev/null)" == "$keys" ]]; do sleep 0.2; done; }

echo "loading $keys keys ..." >&2
port[redis]="$(free_port)"
mkdir -p "$work/redis"
taskset -c "$server_cpu" redis-server --port "${port[redis]}" --dir "$work/redis" --save "" \
    --appendonly no >/dev/null 2>&1 &
pid[redis]=$!
until redis-cli -p "${port[redis]}" ping >/dev/null 2>&1; do sleep 0.1; done
"${probe[@]}" gen "$keys" | taskset -c "$client_cpu" redis-cli -p "${port[redis]}" --pipe >/dev/null
up "${port[redis]}"
redis-cli -p "${port[redis]}" save >/dev/null
kill "${pid[redis]}"
unset 'pid[redis]'
for n in base new; do
    port[$n]="$(free_port)"
    mkdir -p "$work/$n"
    cp "$work/redis/dump.rdb" "$work/$n/dump.rdb"
    if [[ $free_cpu == 1 ]]; then
        place=(env)
        pin=(--pin yes)
    else
        place=(taskset -c "$server_cpu")
        pin=()
    fi
    "${place[@]}" "${bin[$n]}" --shards 1 "${pin[@]}" --port "${port[$n]}" --dir "$work/$n" \
        --save "" >"$work/$n.log" 2>&1 &
    pid[$n]=$!
done
for n in base new; do up "${port[$n]}"; done

for round in $(seq 1 "$rounds"); do
    for n in base new; do
        echo "round $round: $n" >&2
        "${probe[@]}" save "${port[$n]}" "${pid[$n]}" "$keys" "$work/$n/dump.rdb" \
            | sed "s/^/{\"build\": \"$n\", \"load\": \"gets\", \"out\": /; s/\$/}/" >>"$work/out"
        "${probe[@]}" save "${port[$n]}" "${pid[$n]}" "$keys" "$work/$n/dump.rdb" "$get_rate" \
            | sed "s/^/{\"build\": \"$n\", \"load\": \"paced\", \"out\": /; s/\$/}/" >>"$work/out"
        "${probe[@]}" quiet-save "${port[$n]}" "$work/$n/dump.rdb" \
            | sed "s/^/{\"build\": \"$n\", \"load\": \"none\", \"out\": /; s/\$/}/" >>"$work/out"
    done
done
cat "$work/out"
python3 - "$work/out" "$keys" "$rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def med(build, load, fn):
    xs = [fn(r["out"]) for r in rows if r["build"] == build and r["load"] == load]
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
walk = lambda f: lambda o: (o.get("walk") or {}).get(f)
figures = [
    ("BGSAVE alone: wall time (s)", "none", lambda o: o["wall_s"], "{:.3f}"),
    ("BGSAVE alone: RDB written (MB/s)", "none", lambda o: o["rdb_bytes"] / 1e6 / o["wall_s"], "{:.0f}"),
    ("BGSAVE with GETs: wall time (s)", "gets", lambda o: o["wall_s"], "{:.3f}"),
    ("BGSAVE with GETs: RDB written (MB/s)", "gets", lambda o: o["rdb_bytes"] / 1e6 / o["wall_s"], "{:.0f}"),
    ("GET p50 during the save (us)", "gets", lambda o: o["during"]["p50_us"], "{:.0f}"),
    ("GET p99 before the save (us)", "gets", lambda o: o["before"]["p99_us"], "{:.0f}"),
    ("GET p99 during the save (us)", "gets", lambda o: o["during"]["p99_us"], "{:.0f}"),
    ("GETs answered during the save", "gets", lambda o: o["during"]["gets"], "{:.0f}"),
    ("BGSAVE with paced GETs: wall time (s)", "paced", lambda o: o["wall_s"], "{:.3f}"),
    ("BGSAVE with paced GETs: RDB written (MB/s)", "paced", lambda o: o["rdb_bytes"] / 1e6 / o["wall_s"], "{:.0f}"),
    ("paced GET p50 during the save (us)", "paced", lambda o: o["during"]["p50_us"], "{:.0f}"),
    ("paced GET p99 during the save (us)", "paced", lambda o: o["during"]["p99_us"], "{:.0f}"),
    ("paced GETs answered during the save", "paced", lambda o: o["during"]["gets"], "{:.0f}"),
    ("walk: longest hold (us)", "gets", walk("hold_max_us"), "{:.0f}"),
    ("walk: work waiting behind a hold, p50 (us)", "gets", walk("wait_p50_us"), "{:.0f}"),
    ("walk: work waiting behind a hold, p99 (us)", "gets", walk("wait_p99_us"), "{:.0f}"),
]
print(f"\n{sys.argv[2]} keys, {sys.argv[3]} rounds, medians\n")
print("| figure | base | new | new / base |\n| --- | --- | --- | --- |")
for label, load, fn, fmt in figures:
    a, b = med("base", load, fn), med("new", load, fn)
    cell = lambda v: fmt.format(v) if v is not None else "-"
    ratio = f"{b / a:.2f}" if a and b is not None else "-"
    print(f"| {label} | {cell(a)} | {cell(b)} | {ratio} |")
PY
