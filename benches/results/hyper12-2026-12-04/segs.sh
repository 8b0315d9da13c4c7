#!/bin/bash
name=$1 port=$2; shift 2
taskset -c 0 "$@" >/dev/null 2>&1 & pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.05; done
o0=$(awk '/^Tcp:/ && $2 ~ /[0-9]/ {print $12}' /proc/net/snmp); d0=$(awk '/^TcpExt:/ && $2 ~ /[0-9]/ {print $0}' /proc/net/netstat)
taskset -c 1 wrk -t1 -c64 -d3s http://127.0.0.1:$port/ > /tmp/segs.wrk
o1=$(awk '/^Tcp:/ && $2 ~ /[0-9]/ {print $12}' /proc/net/snmp)
kill $pid; wait $pid 2>/dev/null
reqs=$(awk '/requests in/ {print $1}' /tmp/segs.wrk)
echo "$name reqs $reqs outsegs/req $(echo "scale=3; ($o1-$o0)/$reqs" | bc)"
