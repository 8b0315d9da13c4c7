#!/bin/bash
cw() { local name=$1 bin=$2; shift 2
  $bin --size 4096 --duration-ms 2000 --warmup-ms 500 --idle-ms 100 "$@" 2>/dev/null | grep '^{' | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('%-20s p50=%.1f avg=%.1f' % ('$name', d['p50_us'], d['avg_us']))"; }
for r in 1 2 3; do
  cw "e1f event" /tmp/vmp/rdma_perf.e1f --transport rdma --mode event
  cw "head event" /tmp/vmp/rdma_perf.head --transport rdma --mode event
  cw "e1f polling" /tmp/vmp/rdma_perf.e1f --transport rdma --mode polling
  cw "head polling" /tmp/vmp/rdma_perf.head --transport rdma --mode polling
done
