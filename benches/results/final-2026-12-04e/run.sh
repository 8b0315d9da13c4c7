#!/bin/bash
# How the logs in this folder were produced (lead session 5, 2026-12-04; release builds in
# /work/reltarget; the helper's processes stopped with SIGSTOP for the duration of each suite,
# load average in env-*.txt).
set -e
export CARGO_TARGET_DIR=/work/reltarget
cargo build --release -p corewire-bench --bins
cargo build --release -p corewire --example echo_server
cargo build --release -p corewire-kv --bins
B=/work/reltarget/release
ROUNDS=5 DURATION_MS=1500 WARMUP_MS=300 BIN_DIR=$B benches/run.sh percore   # percore.log
ROUNDS=5 DURATION_MS=1500 WARMUP_MS=300 BIN_DIR=$B benches/run.sh rpc       # rpc.log
ROUNDS=5 DURATION_MS=2000 WARMUP_MS=500 BIN_DIR=$B benches/run.sh fairness  # fairness.log
# ring.log: receive ring 1024 vs 256 buffers and bundles on/off, echo 4 KiB and 64 B (see the
# loop at the end of BENCHMARKS.md's fifth-run section)
# kv-percore.log (after the KV branch was merged)
COREWIRE_KV=$B/corewire-kv examples/kv/bench/percore.sh --no-build \
    --requests 100000 --requests-p16 1000000 --rounds 5 \
    --tests set,get,incr,lpush,sadd,hset,mset --mem-rounds 3 --mem-warmup
