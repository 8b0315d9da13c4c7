#!/bin/bash
# latency with one client: redis vs corewire spin50 vs spin0
KV=${KV:-/work/reltarget/release/corewire-kv}; T=${1:-get}; N=${2:-30000}; C=${3:-1}; P=${4:-1}
tick=$(getconf CLK_TCK); st() { awk '{print $14+$15}' /proc/$1/stat; }
one() { local name=$1 port=$2; shift 2
  taskset -c 0 "$@" >/dev/null 2>&1 & local pid=$!; sleep 0.5; local c0=$(st $pid)
  local out=$(taskset -c 1 redis-benchmark -p $port -t $T -n $N -P $P -c $C -r 100000 -q 2>/dev/null | tr '\r' '\n' | grep "requests per second" | tail -1)
  local c1=$(st $pid); kill $pid; wait $pid 2>/dev/null
  echo "$name $out cpu_us/req $(python3 -c "print(round(($c1-$c0)/$tick*1e6/$N,2))")"; }
for r in 1 2; do
 one redis 6390 redis-server --port 6390 --save '' --appendonly no
 one spin50 6391 $KV --port 6391 --shards 1
 one spin0 6392 $KV --port 6392 --shards 1 --idle-spin-us 0
done
