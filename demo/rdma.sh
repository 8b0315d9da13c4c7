#!/bin/bash
# Demo, part 2 (inside the soft-RoCE VM): corewire-kv's binary protocol and the echo service
# over RDMA (rxe0, 10.77.0.1). Run by `cargo xtask demo` through the VM harness.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
IP=${IP:-10.77.0.1}
echo "== RDMA device in the VM"
ibv_devinfo -l | sed 's/^/   /'
log=$(mktemp)
"$BIN/corewire-kv" --shards 2 --port 16379 --rdma "$IP:17500" > "$log" 2>&1 &
srv=$!
trap 'rc=$?; set +e; kill $srv 2>/dev/null; wait $srv 2>/dev/null; rm -f "$log"; exit $rc' EXIT
for _ in $(seq 300); do grep -q "corewire-kv ready" "$log" && break; sleep 0.1; done
grep "corewire-kv ready" "$log" || { cat "$log"; exit 1; }
echo; echo "== kv-client over RDMA"
"$BIN/kv-client" --rdma --addr "$IP:17500" set demo "over rdma" | sed 's/^/   /'
"$BIN/kv-client" --rdma --addr "$IP:17500" get demo | sed 's/^/   /'
"$BIN/kv-client" --rdma --addr "$IP:17500" bench --conns 2 --depth 8 --size 64 --duration-ms 2000 | sed 's/^/   /'
kill $srv; wait $srv 2>/dev/null || true
echo; echo "== echo service over RDMA (rdma_perf, 4 KiB, polling then adaptive), and over TCP"
for mode in polling adaptive; do
  "$BIN/examples/rdma_perf" --mode "$mode" --size 4096 --duration-ms 1500 --idle-ms 500 | sed -n 2p | sed 's/^/   /'
done
"$BIN/examples/rdma_perf" --transport tcp --size 4096 --duration-ms 1500 --idle-ms 500 | sed -n 2p | sed 's/^/   /'
