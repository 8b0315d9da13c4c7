#!/bin/bash
# A flat cpu-clock profile of rdma_perf's event mode inside the VM (issue 15).
#   cargo xtask vm -- benches/results/final-2026-12-04h/event-prof.sh
B=${B:-/work/abbin/B/rdma_perf}
cd /tmp
perf record -q -a -e cpu-clock -F 20000 -o /tmp/ev.data -- $B --transport rdma --mode event --size 4096 --duration-ms 3000 --warmup-ms 300 --idle-ms 0 2>/dev/null | grep '^{' | cut -c1-200
perf report -i /tmp/ev.data --sort comm,dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -25
echo ---
perf report -i /tmp/ev.data --sort comm,symbol --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -90
