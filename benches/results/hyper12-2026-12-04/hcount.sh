#!/bin/bash
# usage: hcount.sh name port cmd...
name=$1 port=$2; shift 2
taskset -c 0 "$@" >/tmp/$name.srv.log 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.05; done
perf stat -e 'syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_writev,syscalls:sys_enter_readv,syscalls:sys_enter_futex,syscalls:sys_enter_sched_yield,context-switches,io_uring:io_uring_submit_req,io_uring:io_uring_complete,io_uring:io_uring_task_add,io_uring:io_uring_poll_arm' -p $pid -o /tmp/$name.perf -- sleep 5 &
sp=$!
taskset -c 1 wrk -t1 -c64 -d5s http://127.0.0.1:$port/ > /tmp/$name.wrk
wait $sp
kill $pid; wait $pid 2>/dev/null
grep 'requests in' /tmp/$name.wrk; cat /tmp/$name.perf
