#!/bin/bash
# The three baseline runs (same binaries each time: /tmp/binA's benchctl, loadgen and
# echo_server, rpc_corewire built from main at 71d51cb), from the worktree, one at a time.
for i in 1 2 3; do
  flock /tmp/bench.lock env ROUNDS=5 DURATION_MS=1500 WARMUP_MS=300 WORKLOAD='64 conn' \
    SERVERS=corewire-rpc,corewire-raw BIN_DIR=/tmp/h51A COREWIRE_ECHO=/tmp/h51A/examples/echo_server \
    benches/run.sh rpc > baseline-A$i.log 2>&1
done
