#!/bin/bash
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
B=${B:-/work/abbin/B/rdma_perf}
cd /tmp
perf record -q -a -e sched:sched_switch,sched:sched_wakeup,syscalls:sys_enter_io_uring_enter,syscalls:sys_exit_io_uring_enter,syscalls:sys_enter_read,syscalls:sys_enter_ioctl,syscalls:sys_enter_write,irq:softirq_entry,irq:softirq_exit -o /tmp/tr.data -- $B --transport rdma --mode event --size 4096 --duration-ms 1500 --warmup-ms 300 --idle-ms 0 2>/dev/null | grep '^{' | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('requests', d['requests'], 'p50', d['p50_us'], 'avg', d['avg_us'])"
perf script -i /tmp/tr.data -F comm,tid,cpu,time,event,trace 2>/dev/null > /tmp/tr.txt
wc -l /tmp/tr.txt
grep -E "shard" /tmp/tr.txt > /tmp/tr2.txt; wc -l /tmp/tr2.txt; n=$(wc -l < /tmp/tr2.txt); sed -n "$((n/2)),$((n/2+70))p" /tmp/tr2.txt | sed "s/  */ /g" | cut -c1-150
