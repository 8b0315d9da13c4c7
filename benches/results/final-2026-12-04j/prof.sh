#!/bin/bash
B=/work/reltarget/release
T=${1:-lpush}
taskset -c 0 $B/corewire-kv --shards 1 --port 21050 >/dev/null 2>&1 &
SP=$!
sleep 0.7
taskset -c 1 redis-benchmark -p 21050 -t $T -n 4000000 -P 16 -c 50 -q >/dev/null &
BP=$!
sleep 0.8
perf record --call-graph dwarf,8192 -F 999 -p $SP -o /tmp/r/kv-$T-dw.data -- sleep 1.5 >/dev/null 2>&1
kill $BP; kill -INT $SP; wait
