#!/usr/bin/env bash
# The server's system calls per request, by call, for one closed-loop echo workload:
#
#   benches/echo-syscalls.sh LABEL SERVER CONNS DEPTH SIZE
#
# SERVER is `corewire` (the echo_server example on its epoll backend, one shard, its default
# idle spin), `corewire-uring` (the same on io_uring), `tokio` (echo_tokio --current-thread),
# or a command with {addr} in it (leading VAR=VALUE words set its environment). The server
# runs on SERVER_CPU (0), `loadgen` on CLIENT_CPU (1) for 500 ms of warm-up and WINDOW_MS
# (2000); `perf stat` counts the server's syscall tracepoints over the window's middle
# (from 100 ms in to 100 ms before its end), and the counts are divided by the requests of
# that stretch (the window's QPS times its length). Needs perf and permission to trace.
set -euo pipefail
label=$1 server=$2 conns=$3 depth=$4 size=$5
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin=${BIN_DIR:-${CARGO_TARGET_DIR:-$repo/target}/release}
echo_server=${COREWIRE_ECHO:-$bin/examples/echo_server}
window_ms=${WINDOW_MS:-2000}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
case $server in
  corewire) cmd=(COREWIRE_BACKEND=epoll "$echo_server" --addr "$addr" --shards 1 --no-pin) ;;
  corewire-uring) cmd=("$echo_server" --addr "$addr" --shards 1 --no-pin) ;;
  tokio) cmd=("$bin/echo_tokio" --addr "$addr" --current-thread) ;;
  *) read -ra cmd <<< "${server//\{addr\}/$addr}" ;;
esac
envs=()
while [[ ${cmd[0]} == *=* ]]; do envs+=("${cmd[0]}"); cmd=("${cmd[@]:1}"); done
out=$(mktemp -d)
env "${envs[@]}" taskset -c "${SERVER_CPU:-0}" "${cmd[@]}" >"$out/server.log" 2>&1 &
spid=$!
for _ in $(seq 1 300); do [[ -n "$(ss -Hltn "sport = :$port")" ]] && break; sleep 0.02; done
taskset -c "${CLIENT_CPU:-1}" "$bin/loadgen" --addr "$addr" --conns "$conns" --depth "$depth" \
  --size "$size" --warmup-ms 500 --duration-ms "$window_ms" >"$out/load.json" &
lpid=$!
sleep 0.6
counted_ms=$((window_ms - 200))
events=raw_syscalls:sys_enter
for c in recvfrom sendto recvmsg sendmsg writev read write epoll_wait epoll_pwait epoll_ctl sched_yield io_uring_enter; do
  events+=",syscalls:sys_enter_$c"
done
perf stat -x, -e "$events" -p "$spid" -- sleep "$(echo "$counted_ms / 1000" | bc -l)" 2>"$out/perf.csv" >/dev/null
wait $lpid
kill "$spid"; wait "$spid" 2>/dev/null || true
qps=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["qps"])' "$out/load.json")
python3 - "$out/perf.csv" "$qps" "$counted_ms" "$label" "$conns" "$depth" "$size" <<'EOF'
import sys
path, qps, ms, label, conns, depth, size = sys.argv[1:]
reqs = float(qps) * int(ms) / 1000
row = {}
for line in open(path):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].replace(".", "").isdigit():
        row[f[2].split(":")[-1].replace("sys_enter_", "").replace("sys_enter", "all")] = int(float(f[0]))
parts = " ".join(f"{k} {v / reqs:.3f}" for k, v in row.items() if v and k != "all")
print(f"{label:16} {conns:>4}x{depth:<3} {size:>5} B  {float(qps):9.0f} req/s  syscalls/req {row.get('all', 0) / reqs:.3f}: {parts}")
EOF
rm -rf "$out"
