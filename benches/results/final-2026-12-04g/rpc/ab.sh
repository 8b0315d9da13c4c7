#!/bin/bash
# RPC vs raw echo at 64 connections, before (3b8b488, helper-50's base build) and after
# (main with rpc4k merged), alternating, quiet machine (no other engineer running).
cd /work/main
for i in 1 2 3; do
  for v in before after; do
    case $v in before) d=/work/helpertarget-base/release ;; after) d=/work/reltarget/release ;; esac
    echo "=== $v $i $(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"
    ROUNDS=5 DURATION_MS=1500 WARMUP_MS=300 WORKLOAD='64 conn' SERVERS=corewire-rpc,corewire-raw \
      BIN_DIR=$d COREWIRE_ECHO=$d/examples/echo_server benches/run.sh rpc 2>&1 | grep -E "^\|"
  done
done
