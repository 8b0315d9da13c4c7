#!/bin/bash
# As ab.sh, but both sides use the same benchctl, loadgen and echo_server (3b8b488's build):
# only rpc_corewire differs (A = 3b8b488, B = main with rpc4k merged).
cd /work/main
for i in 1 2 3; do
  for v in A B; do
    echo "=== $v $i $(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
    ROUNDS=5 DURATION_MS=1500 WARMUP_MS=300 WORKLOAD='64 conn' SERVERS=corewire-rpc,corewire-raw \
      BIN_DIR=/tmp/bin$v COREWIRE_ECHO=/tmp/bin$v/examples/echo_server benches/run.sh rpc 2>&1 | grep -E "^\|"
  done
done
