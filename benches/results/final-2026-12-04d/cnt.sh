#!/bin/bash
# usage: cnt.sh rpc|raw conns depth size
B=/work/reltarget/release
kind=$1; conns=$2; depth=$3; size=$4; port=$((21100 + RANDOM % 500))
if [ $kind = rpc ]; then
  taskset -c 0 $B/rpc_corewire server --addr 127.0.0.1:$port --shards 1 >/dev/null 2>&1 &
  CLI="$B/rpc_corewire client"
else
  taskset -c 0 $B/examples/echo_server --addr 127.0.0.1:$port --shards 1 >/dev/null 2>&1 &
  CLI="$B/loadgen"
fi
sleep 0.5; SP=$!
SP=$(pgrep -f "127.0.0.1:$port --shards 1" | head -1)
perf stat -e io_uring:io_uring_submit_req,io_uring:io_uring_complete,net:net_dev_xmit,syscalls:sys_enter_io_uring_enter -p $SP -o /tmp/stat.$kind -- sleep 2 &
PS=$!
taskset -c 1 $CLI --addr 127.0.0.1:$port --conns $conns --depth $depth --size $size --duration-ms 2500 --warmup-ms 300 --threads 1 --server-pid $SP > /tmp/out.$kind 2>&1
wait $PS
kill $SP
python3 - <<PY
import json,re
o=json.loads(open('/tmp/out.$kind').read().strip().splitlines()[-1])
print("$kind qps",o['qps'],"srv us/req",o['server_cpu_us_per_req'],"user",o.get('server_user_us_per_req'),"sys",o.get('server_sys_us_per_req'),"cli",o['client_cpu_us_per_req'])
reqs=o['qps']*2.0
for l in open('/tmp/stat.$kind'):
    m=re.match(r'\s*([\d,]+)\s+(\S+)',l)
    if m and ':' in m.group(2): print("  %-40s %.3f per req"%(m.group(2), int(m.group(1).replace(',',''))/reqs))
PY
