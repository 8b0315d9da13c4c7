#!/bin/bash
# zbench.sh BIN... : CPU per request of sorted-set reads on a 100,000-member zset, each server
# pinned to CPU 0, redis-benchmark on CPU 1. Prints one line per server and command.
set -u
cmds=("ZRANK z member:50000" "ZREVRANK z member:99" "ZCOUNT z 40000 60000" "ZRANGEBYSCORE z 50000 50009" "ZRANGE z 50000 50009" "ZREVRANGE z 0 9 WITHSCORES" "ZADD z 123456.5 member:77")
load() { python3 -c "
import sys
for i in range(100000):
    a=['ZADD','z',str(i),'member:%d'%i]
    sys.stdout.write('*%d\r\n'%len(a)+''.join('\$%d\r\n%s\r\n'%(len(x),x) for x in a))
" | redis-cli -p $1 --pipe >/dev/null; }
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
for bin in "$@"; do
  port=$((7800 + RANDOM % 100))
  if [ "$bin" = redis ]; then taskset -c 0 redis-server --port $port --save '' --appendonly no >/dev/null & 
  else taskset -c 0 $bin --shards 1 --port $port >/dev/null 2>&1 & fi
  pid=$!; for i in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done; load $port; echo "$(basename $bin): zcard $(redis-cli -p $port zcard z)"
  for c in "${cmds[@]}"; do
    n=50000
    t0=$(cpu $pid); out=$(taskset -c 1 redis-benchmark -p $port -n $n -c 16 -P 8 --csv $c 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"'); t1=$(cpu $pid)
    echo "$(basename $bin) | $c | $out rps | $(( (t1-t0)*10000000/n )) ns CPU/req"
  done
  kill $pid; wait $pid 2>/dev/null
done
