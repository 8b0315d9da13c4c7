#!/bin/bash
name=$1 port=$2; shift 2
taskset -c 0 "$@" >/tmp/$name.srv.log 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.05; done
taskset -c 1 perf stat -e 'syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_read,syscalls:sys_enter_write,context-switches,task-clock' -o /tmp/$name.wperf wrk -t1 -c64 -d5s http://127.0.0.1:$port/ > /tmp/$name.wrk
kill $pid; wait $pid 2>/dev/null
grep -E 'requests in|Req' /tmp/$name.wrk; grep -E 'sys|context|task-clock' /tmp/$name.wperf
