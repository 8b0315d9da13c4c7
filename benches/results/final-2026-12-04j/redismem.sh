#!/usr/bin/env bash
# redis-server used_memory delta per item for the loads kv_memory runs (100000 items each)
set -euo pipefail
N=${N:-100000}
gen() { python3 - "$1" "$N" <<'PY'
import sys
t, n = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
def cmd(*a):
    b = [x.encode() if isinstance(x, str) else x for x in a]
    out.write(b"*%d\r\n" % len(b) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in b))
for i in range(n):
    if t == "string": cmd("SET", f"key:{i}", f"val{i:06}")
    elif t == "hash": cmd("HSET", "h", f"field:{i}", f"val{i:06}")
    elif t == "list": cmd("RPUSH", "l", f"val{i:06}")
    elif t == "set": cmd("SADD", "s", f"member:{i}")
    elif t == "zset": cmd("ZADD", "z", str(i), f"member:{i}")
PY
}
for t in string hash list set zset; do
  d=$(mktemp -d); port=$((22000 + RANDOM % 1000))
  redis-server --port $port --save '' --appendonly no --dir $d >/dev/null & pid=$!
  sleep 0.5
  before=$(redis-cli -p $port info memory | grep '^used_memory:' | tr -d '\r' | cut -d: -f2)
  gen $t | redis-cli -p $port --pipe >/dev/null
  after=$(redis-cli -p $port info memory | grep '^used_memory:' | tr -d '\r' | cut -d: -f2)
  echo "$t $(( (after - before) / N ))"
  kill $pid; wait $pid 2>/dev/null || true; rm -rf $d
done
