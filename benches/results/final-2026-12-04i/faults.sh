#!/bin/bash
# Page faults and memory syscalls per round trip (rdma_perf D, event and polling modes).
#   cargo xtask vm -- benches/results/final-2026-12-04i/faults.sh
EV='page-faults,syscalls:sys_enter_madvise,syscalls:sys_enter_mmap,syscalls:sys_enter_munmap,syscalls:sys_enter_brk,syscalls:sys_enter_write,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_clock_gettime,sched:sched_switch'
for m in event polling; do
  echo "== D $m"
  perf stat -e "$EV" -x, -o /tmp/st.$m -- /work/abbin/D/rdma_perf --transport rdma --mode $m --size 4096 --duration-ms 2000 --warmup-ms 300 --idle-ms 0 2>/dev/null | grep '^{' | cut -c1-160
  grep -v '^#' /tmp/st.$m | cut -d, -f1,3
done
