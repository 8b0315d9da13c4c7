#!/bin/bash
T=${1:-set}; N=${2:-200000}; P=${3:-1}; R=${4:-2}; KV=${KV:-/work/reltarget/release/corewire-kv}
tick=$(getconf CLK_TCK)
st() { awk '{print $14, $15}' /proc/$1/stat; }
one() { local name=$1 port=$2; shift 2
  taskset -c 0 "$@" >/dev/null 2>&1 & local pid=$!; sleep 0.5
  read u0 s0 < <(st $pid)
  local out=$(taskset -c 1 redis-benchmark -p $port -t $T -n $N -P $P -c 50 -r 100000 -q 2>/dev/null | tr '\r' '\n' | grep "requests per second" | tail -1)
  read u1 s1 < <(st $pid)
  kill $pid; wait $pid 2>/dev/null
  python3 -c "t=$tick; n=$N; print('%-10s %s | user %.2f sys %.2f tot %.2f us/req' % ('$name', '''$out'''.strip()[:60], ($u1-$u0)/t*1e6/n, ($s1-$s0)/t*1e6/n, ($u1-$u0+$s1-$s0)/t*1e6/n))"
}
for r in $(seq $R); do
  one redis 6390 redis-server --port 6390 --save '' --appendonly no
  one cw-spin50 6391 $KV --port 6391 --shards 1
  one cw-spin0 6392 $KV --port 6392 --shards 1 --idle-spin-us 0
done
