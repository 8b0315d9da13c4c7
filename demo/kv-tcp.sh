#!/bin/bash
# Demo, part 1 (host): corewire-kv on 2 shards, driven by redis-cli, redis-benchmark and the
# binary client. Run by `cargo xtask demo` after a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
RESP_PORT=${RESP_PORT:-16379}; BIN_PORT=${BIN_PORT:-17379}
log=$(mktemp)
"$BIN/corewire-kv" --shards 2 --port "$RESP_PORT" --binary-port "$BIN_PORT" > "$log" 2>&1 &
srv=$!
trap 'rc=$?; set +e; kill $srv 2>/dev/null; wait $srv 2>/dev/null; rm -f "$log"; exit $rc' EXIT
for _ in $(seq 100); do grep -q "corewire-kv ready" "$log" && break; sleep 0.1; done
grep "corewire-kv ready" "$log" || { cat "$log"; exit 1; }

echo; echo "== redis-cli against corewire-kv (RESP2, 127.0.0.1:$RESP_PORT)"
rc() { printf '> redis-cli %s\n' "$*"; redis-cli -p "$RESP_PORT" "$@"; }
rc set greeting "hello from corewire"
rc get greeting
rc mset a 1 b 2 c 3
rc mget a b c greeting
rc incrby a 41
rc expire greeting 60
rc ttl greeting
rc get nosuchkey
rc dbsize

echo; echo "== redis-benchmark -t set,get -n 200000 -r 100000 -c 50 -P 16 -q"
redis-benchmark -p "$RESP_PORT" -t set,get -n 200000 -r 100000 -c 50 -P 16 -q 2>/dev/null | tr '\r' '\n' | grep -E "^(SET|GET):" | sed 's/^/   /'

echo; echo "== kv-client bench (binary protocol over the corewire service framework, TCP)"
"$BIN/kv-client" --addr "127.0.0.1:$BIN_PORT" bench --conns 8 --depth 16 --size 64 --duration-ms 2000 | sed 's/^/   /'

echo; echo "== per-shard keys (INFO keyspace / stats)"
redis-cli -p "$RESP_PORT" info | tr -d '\r' | grep -E "^(shard|keys|db0|# Shard|total_commands|instantaneous)" | head -12 | sed 's/^/   /'
