#!/usr/bin/env bash
# Per-request callgrind count of one redis-benchmark test (set, get, pfadd, ...) against a
# corewire-kv binary (epoll backend, 1 shard) or redis-server: a copy of kv-evalsha-callgrind.sh
# writing under /tmp/reqpath. Usage: kv-reqpath-callgrind.sh LABEL BIN|redis TEST PIPE N
# cg.sh LABEL BIN(or "redis") TEST PIPE N -> prints Ir/req; leaves callgrind.out in /tmp/reqpath/out/LABEL-TEST-PPIPE
set -euo pipefail
label=$1 bin=$2 t=$3 p=$4 n=$5
out=/tmp/reqpath/out; mkdir -p $out
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
f=$out/$label-$t-P$p.cg
rm -f $f*
if [[ $bin == redis ]]; then
  mkdir -p /tmp/reqpath/rdir
  valgrind --tool=callgrind --callgrind-out-file=$f redis-server --port $port --save "" --appendonly no --dir /tmp/reqpath/rdir >/tmp/reqpath/vg.log 2>&1 &
else
  COREWIRE_BACKEND=epoll valgrind --tool=callgrind --callgrind-out-file=$f $bin --shards 1 --port $port >/tmp/reqpath/vg.log 2>&1 &
fi
vpid=$!
for i in $(seq 1 300); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.2; done
script="redis.call('incr', KEYS[1]) redis.call('incr', KEYS[1]) return redis.call('get', KEYS[1])"
true
set -f
case $t in
  evalsha) cmd="EVALSHA $(redis-cli -p $port script load "$script") 1 bench:eval:__rand_int__" ;;
  xadd) cmd="XADD bench:xs * field value" ;;
  xread) cmd="XREAD COUNT 10 STREAMS bench:x 0" ;;
  setbit) cmd="SETBIT bench:bits:__rand_int__ 7 1" ;;
  pfadd) cmd="PFADD bench:hll e:__rand_int__" ;;
  geoadd) cmd="GEOADD bench:geo 13.361389 38.115556 m:__rand_int__" ;;
  *) cmd="" ;;
esac
run() { if [[ -n $cmd ]]; then redis-benchmark -p $port -n $1 -r 100000 -c 50 -P $p -q $cmd; else redis-benchmark -p $port -t $t -n $1 -r 100000 -c 50 -P $p -q; fi >/dev/null 2>&1; }
run 20000
callgrind_control -z $vpid >/dev/null 2>&1
run $n
callgrind_control -d $vpid >/dev/null 2>&1
dump=$f.1
for _ in $(seq 1 50); do [[ -s $dump ]] && grep -q '^totals:' $dump && break; sleep 0.2; done
kill $vpid; wait $vpid 2>/dev/null || true
ir=$(grep -E '^summary:' $dump | awk '{print $2}')
printf "%-12s %-8s P%-3s %8d Ir/req  (n %d, %s)\n" $label $t $p $((ir / n)) $n $dump
