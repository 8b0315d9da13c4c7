#!/bin/bash
# Full sync time of N keys, 4-shard corewire-kv master -> 4-shard corewire-kv replica,
# over the single stream (replica with --repl-shard-links no) vs 4 shard links (the default).
# usage: examples/kv/bench/shard_links_sync.sh BIN [KEYS (1000000)] [ROUNDS (3)]
# (ports 7811/7812, work dir /tmp/rsb/run). Prints one line per round and mode.
B=$1; N=${2:-1000000}; R=${3:-3}
D=/tmp/rsb/run; rm -rf $D; mkdir -p $D/m
if redis-cli -p 7811 ping >/dev/null 2>&1 || redis-cli -p 7812 ping >/dev/null 2>&1; then
  echo "port 7811/7812 busy" >&2; exit 1
fi
cd $D/m
$B --port 7811 --shards 4 >/dev/null 2>err &
MP=$!
sleep 1
echo "master pid $MP: $(readlink /proc/$MP/exe)"
python3 - "$N" <<'PY' | redis-cli -p 7811 --pipe >/dev/null
import sys
n=int(sys.argv[1]); out=sys.stdout
for i in range(n):
    k=b"key:%012d" % i; v=b"v" * 32
    out.write("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$32\r\n%s\r\n" % (len(k), k.decode(), v.decode()))
PY
echo "master keys: $(redis-cli -p 7811 dbsize)"
for round in $(seq 1 $R); do
  for mode in single links; do
    rm -rf $D/r; mkdir -p $D/r; cd $D/r
    if [ $mode = links ]; then links_opt=yes; else links_opt=no; fi
    $B --port 7812 --shards 4 --repl-shard-links $links_opt >/dev/null 2>err & RP=$!
    sleep 1
    t0=$(date +%s.%N)
    redis-cli -p 7812 replicaof 127.0.0.1 7811 >/dev/null
    while true; do
      st=$(redis-cli -p 7812 info replication | tr -d '\r' | grep master_link_status | cut -d: -f2)
      [ "$st" = up ] && [ "$(redis-cli -p 7812 dbsize)" = "$N" ] && break
      sleep 0.02
    done
    t1=$(date +%s.%N)
    links=$(redis-cli -p 7812 info replication | tr -d '\r' | grep slave_shard_links | cut -d: -f2)
    echo "round $round $mode links=${links:-1} seconds=$(echo "$t1 - $t0" | bc)"
    kill $RP; wait $RP 2>/dev/null
  done
done
kill $MP; wait $MP 2>/dev/null
