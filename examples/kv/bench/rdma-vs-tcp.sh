#!/bin/bash
# The binary client over RDMA vs over TCP, inside the soft-RoCE VM (same boot, interleaved):
#   cargo build --release -p corewire-kv && cargo xtask vm -- examples/kv/bench/rdma-vs-tcp.sh
# Knobs: ROUNDS (3) DUR_MS (2000) POLLER (polling)
set -u
cd "$(dirname "$0")/../../.."
BIN=${BIN:-target/release}; ROUNDS=${ROUNDS:-3}; DUR_MS=${DUR_MS:-2000}; POLLER=${POLLER:-polling}
IP=${IP:-10.77.0.1}
log=$(mktemp)
"$BIN/corewire-kv" --shards 2 --port 0 --binary-port 17379 --rdma "$IP:17500" --rdma-poller "$POLLER" > "$log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 300); do grep -q "corewire-kv ready" "$log" && break; sleep 0.1; done
grep "corewire-kv ready" "$log" || { cat "$log"; exit 1; }
for r in $(seq "$ROUNDS"); do
  for t in tcp rdma; do
    if [ $t = rdma ]; then a=(--rdma --addr "$IP:17500"); else a=(--addr 127.0.0.1:17379); fi
    echo "round=$r transport=$t $("$BIN/kv-client" "${a[@]}" bench --conns 2 --depth 8 --size 64 --duration-ms "$DUR_MS" | grep -E 'qps|latency' | tr '\n' ' ')"
  done
done
