#!/bin/bash
# Quiet-window benchmarks of 2026-12-04 (third session): hyper, RPC, per-core echo.
cd /work/main
export CARGO_TARGET_DIR=/work/reltarget BIN_DIR=/work/reltarget/release
OUT=benches/results/final-2026-12-04c; mkdir -p $OUT
{ date; uptime; git log --oneline -1; } > $OUT/env.txt
echo "+ ROUNDS=5 SECS=4 CARGO_TARGET_DIR=/work/reltarget examples/hyper_bench.sh" > $OUT/hyper.log
ROUNDS=5 SECS=4 examples/hyper_bench.sh >> $OUT/hyper.log 2>&1
uptime >> $OUT/env.txt
ROUNDS=5 DURATION_MS=1500 WARMUP_MS=300 benches/run.sh rpc > $OUT/rpc.log 2>&1
uptime >> $OUT/env.txt
ROUNDS=5 DURATION_MS=1500 WARMUP_MS=300 benches/run.sh percore > $OUT/percore.log 2>&1
{ date; uptime; } >> $OUT/env.txt
echo "+ COREWIRE_KV=/work/reltarget/release/corewire-kv examples/kv/bench/percore.sh --no-build --requests 100000 --requests-p16 1000000 --rounds 5 --tests set,get,incr,lpush,sadd,hset,mset" > $OUT/kv-percore.log
COREWIRE_KV=/work/reltarget/release/corewire-kv examples/kv/bench/percore.sh --no-build --requests 100000 --requests-p16 1000000 --rounds 5 --tests set,get,incr,lpush,sadd,hset,mset >> $OUT/kv-percore.log 2>&1
{ date; uptime; } >> $OUT/env.txt
