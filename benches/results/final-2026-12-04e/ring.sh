#!/bin/bash
# Receive ring A/B (lead session 5): echo_server, one shard on CPU 0, loadgen on CPU 1, 64
# connections x depth 4; variants interleaved in each round: ring 1024 or 256 buffers of 4 KiB,
# bundled receives on or off (COREWIRE_IO_URING=nobundle). Prints one JSON line per run.
B=${BIN_DIR:-/work/reltarget/release}; R=${ROUNDS:-5}; port=29000
for size in 4096 64; do for r in $(seq $R); do
  for v in "1024x4096 bundle" "256x4096 bundle" "1024x4096 nobundle" "256x4096 nobundle"; do
    set -- $v; port=$((port+1))
    env $([ $2 = nobundle ] && echo COREWIRE_IO_URING=nobundle) taskset -c 0 $B/examples/echo_server \
        --addr 127.0.0.1:$port --shards 1 --recv-buffers $1 >/dev/null 2>&1 & sp=$!; sleep 0.4
    echo "size=$size ring=$1 $2 $(taskset -c 1 $B/loadgen --addr 127.0.0.1:$port --conns 64 --depth 4 \
        --size $size --duration-ms 1500 --warmup-ms 300 --threads 1 --server-pid $sp 2>/dev/null | grep '^{')"
    kill $sp; wait $sp 2>/dev/null
  done
done; done
