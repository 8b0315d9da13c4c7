#!/bin/bash
# Where rdma_perf's shards spend user time in event mode, inside the VM (call graphs).
#   cargo xtask vm -- benches/results/final-2026-12-04h/event-prof-g.sh
B=${B:-/work/abbin/B/rdma_perf}
cd /tmp
perf record -q -e cpu-clock -F 4000 --call-graph dwarf,8192 -o /tmp/evg.data -- $B --transport rdma --mode event --size 4096 --duration-ms 3000 --warmup-ms 300 --idle-ms 0 2>/dev/null | grep '^{' | cut -c1-160
for c in srv-shard-0 cli-shard-0; do
  echo "=== $c (children, user symbols)"
  perf report -i /tmp/evg.data --comm $c --children --sort symbol --stdio 2>/dev/null | grep -E '^ +[0-9]' | grep -v '\[k\]' | head -70 | cut -c1-170
done
echo "=== srv kernel top"
perf report -i /tmp/evg.data --comm srv-shard-0 --no-children --sort symbol --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -30 | cut -c1-150
