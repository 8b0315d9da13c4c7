#!/bin/bash
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
B=/tmp/vmp/rdma_perf.new
for args in "--mode event" "--mode event --spin-us 0" "--mode polling"; do
perf stat -x, -o /tmp/ps.txt -e sched:sched_switch,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_sched_yield,syscalls:sys_enter_read,syscalls:sys_enter_ioctl,syscalls:sys_enter_write,syscalls:sys_enter_clock_gettime,irq:softirq_entry -- $B --transport rdma $args --size 4096 --duration-ms 3000 --warmup-ms 0 --idle-ms 0 2>/dev/null | grep '^{' | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('ARGS $args requests', d['requests'], 'p50', d['p50_us'])"
cat /tmp/ps.txt | grep -v "^#" | grep -v "^$"
done
