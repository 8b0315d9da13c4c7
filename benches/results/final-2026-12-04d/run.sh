#!/bin/bash
# How the logs in this folder were produced (lead session 4, 2026-12-04, quiet machine after
# the helpers stopped; release builds in /work/reltarget).
set -e
export CARGO_TARGET_DIR=/work/reltarget
cargo build --release -p corewire-bench --bins
cargo build --release -p corewire --example echo_server
cargo build --release -p corewire-kv --bins
# rpc.log .. rpc5.log: five runs of the RPC suite, each 5 interleaved rounds (see BENCHMARKS.md
# for which code each run measured); rpc6.log and rpc7.log: ROUNDS=7, the final code.
ROUNDS=5 DURATION_MS=1500 WARMUP_MS=300 BIN_DIR=/work/reltarget/release benches/run.sh rpc
ROUNDS=7 DURATION_MS=1500 WARMUP_MS=300 BIN_DIR=/work/reltarget/release benches/run.sh rpc
# kv-percore.log
COREWIRE_KV=/work/reltarget/release/corewire-kv examples/kv/bench/percore.sh --no-build \
    --requests 100000 --requests-p16 1000000 --rounds 5 \
    --tests set,get,incr,lpush,sadd,hset,mset --mem-rounds 3 --mem-warmup
