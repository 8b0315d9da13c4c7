#!/bin/bash
# Callers of the user-space hot spots of rdma_perf's event mode, inside the VM.
#   cargo xtask vm -- benches/results/final-2026-12-04h/event-prof-callers.sh
B=${B:-/work/abbin/B/rdma_perf}
cd /tmp
perf record -q -e cpu-clock -F 4000 --call-graph dwarf,8192 -o /tmp/evg.data -- $B --transport rdma --mode event --size 4096 --duration-ms 3000 --warmup-ms 300 --idle-ms 0 2>/dev/null | grep '^{' | cut -c1-160
for c in srv-shard-0 cli-shard-0; do
  echo "=== $c user self"
  perf report -i /tmp/evg.data --comm $c --no-children --sort dso,symbol --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | grep -v '\[k\]' | head -40 | cut -c1-150
  for s in __memset_avx2_unaligned_erms clock_gettime@@GLIBC_2.17 __memmove_avx_unaligned_erms; do
    echo "--- $c callers of $s"
    perf report -i /tmp/evg.data --comm $c --no-children --stdio -G --symbols=$s 2>/dev/null | grep -v '^$' | grep -vE '^#|inlined|catch_unwind|call_once|clone3|start_thread|thread_start|spawn_unchecked|backtrace|run_shard|run_ready|RuntimeBuilder' | head -30 | cut -c1-150
  done
done
