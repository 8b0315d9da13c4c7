#!/bin/bash
# hyper on corewire (1 shard) vs hyper on tokio (current-thread, 1 worker): HTTP/1.1
# keep-alive hello world, closed loop (wrk: each connection sends its next request when the
# response arrives). Server pinned to CPU 0, wrk to CPU 1. ROUNDS interleaved rounds; prints
# requests/s, wrk's p50/p99, the server's user and system CPU per request (from
# /proc/PID/stat) and both sides' CPU use (wrk near 100 %: the client sets the rate), then
# medians and the corewire/tokio ratio.
#
#   examples/hyper_bench.sh            # ROUNDS=5 CONNS=64 SECS=15
#   ROUNDS=7 CONNS=256 examples/hyper_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5} CONNS=${CONNS:-64} SECS=${SECS:-15} SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1}
command -v wrk >/dev/null || { echo "wrk missing: apt-get install wrk (or cargo xtask setup)" >&2; exit 1; }
cargo build --release --example hyper_hello --example hyper_hello_tokio
bin=${CARGO_TARGET_DIR:-target}/release/examples
tick=$(getconf CLK_TCK)
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

run_one() { # name port cmd...
  local name=$1 port=$2; shift 2
  taskset -c "$SERVER_CPU" "$@" >"$out/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.05; done
  read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  # wrk's own CPU too: if it is near 100 % of its vCPU, the client sets the rate, not the server.
  taskset -c "$CLIENT_CPU" /usr/bin/time -f '%e %U %S' -o "$out/wrk.time" \
      wrk -t1 -c"$CONNS" -d"${SECS}s" --latency "http://127.0.0.1:$port/" >"$out/wrk"
  read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  local reqs rps p50 p99
  reqs=$(awk '/requests in/ {print $1}' "$out/wrk")
  rps=$(awk '/Requests\/sec/ {print $2}' "$out/wrk")
  p50=$(awk '$1=="50%" {print $2}' "$out/wrk")
  p99=$(awk '$1=="99%" {print $2}' "$out/wrk")
  local wall wu ws
  read -r wall wu ws < "$out/wrk.time"
  awk -v n="$name" -v rps="$rps" -v reqs="$reqs" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v t="$tick" \
      -v p50="$p50" -v p99="$p99" -v wall="$wall" -v wu="$wu" -v ws="$ws" 'BEGIN {
        printf "%-8s %10.0f req/s  p50 %-8s p99 %-8s user %.2f us/req  sys %.2f us/req  srv CPU %3.0f%%  wrk CPU %3.0f%%\n",
               n, rps, p50, p99, u / t / reqs * 1e6, s / t / reqs * 1e6,
               (u + s) / t / wall * 100, (wu + ws) / wall * 100 }' | tee -a "$out/all"
}

echo "# hyper hello world, 1 server vCPU (cpu $SERVER_CPU), wrk -t1 -c$CONNS -d${SECS}s on cpu $CLIENT_CPU"
for r in $(seq "$ROUNDS"); do
  echo "## round $r"
  run_one corewire 18080 "$bin/hyper_hello" 127.0.0.1:18080 1
  run_one tokio 18081 "$bin/hyper_hello_tokio" 127.0.0.1:18081
done
median() { # name
  awk -v n="$1" '$1 == n {print $2}' "$out/all" | sort -n |
    awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
mc=$(median corewire) mt=$(median tokio)
echo "median corewire $mc req/s, tokio $mt req/s over $ROUNDS rounds"
awk -v a="$mc" -v b="$mt" 'BEGIN { if (b > 0) printf "corewire / tokio = %.2fx\n", a / b }'
