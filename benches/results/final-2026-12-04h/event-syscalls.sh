#!/bin/bash
# Syscalls and context switches per round trip in event mode, corewire (A, B) vs perftest -e.
#   cargo xtask vm -- benches/results/final-2026-12-04h/event-syscalls.sh
IP=10.77.0.1; DEV=rxe0
EV='syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_ioctl,syscalls:sys_enter_sched_yield,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_poll,sched:sched_switch'
for v in A B; do
  echo "== $v"
  perf stat -e "$EV" -x, -o /tmp/st.$v -- /work/abbin/$v/rdma_perf --transport rdma --mode event --size 4096 --duration-ms 2000 --warmup-ms 300 --idle-ms 0 2>/dev/null | grep '^{' | cut -c1-140
  cat /tmp/st.$v | grep -v '^#' | cut -d, -f1,3
done
echo "== perftest -e (server + client, 2000 iterations)"
perf stat -e "$EV" -x, -o /tmp/st.ps -- ib_send_lat -d $DEV -R -s 4096 -n 2000 -e > /dev/null 2>&1 &
sleep 1
perf stat -e "$EV" -x, -o /tmp/st.pc -- ib_send_lat -d $DEV -R -s 4096 -n 2000 -e $IP | grep -E '^ +4096'
wait
echo "-- server"; grep -v '^#' /tmp/st.ps | cut -d, -f1,3
echo "-- client"; grep -v '^#' /tmp/st.pc | cut -d, -f1,3
