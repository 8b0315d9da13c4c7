#!/bin/bash
set -u
SIZE=4096; ITERS=2000; IP=10.77.0.1; DEV=rxe0; OUT=$(mktemp -d); B=/work/reltarget/release/examples/rdma_perf
perftest() { local name=$1 sc=$2 cc=$3; shift 3
  taskset -c $sc ib_send_lat -d $DEV -R -s $SIZE -n $ITERS "$@" > $OUT/srv.log 2>&1 & local sp=$!
  sleep 1
  for _ in 1 2 3 4 5 6 7 8; do taskset -c $cc ib_send_lat -d $DEV -R -s $SIZE -n $ITERS "$@" $IP > $OUT/cli.log 2>&1 && break; sleep 1; done
  wait $sp
  awk -v n="$name" -v s=$SIZE '$1==s && NF>=9 {printf "%-28s p50=%.1f avg=%.1f\n", n, 2*$5, 2*$6}' $OUT/cli.log; }
cw() { local name=$1; shift
  $B --size $SIZE --duration-ms 2000 --warmup-ms 500 --idle-ms 100 "$@" 2>/dev/null | grep '^{' | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('%-28s p50=%.1f avg=%.1f' % ('$name', d['p50_us'], d['avg_us']))"; }
for r in 1 2 3; do
  perftest "perftest -e unpinned" 0-1 0-1 -e
  perftest "perftest -e pinned 0/1" 0 1 -e
  perftest "perftest -e pinned 0/0" 0 0 -e
  cw "corewire event 0/1" --transport rdma --mode event
  cw "corewire event 0/0" --transport rdma --mode event --server-cpu 0 --client-cpu 0
done
