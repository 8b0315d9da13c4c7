#!/usr/bin/env bash
# Server instructions per request of one closed-loop echo workload, counted with callgrind:
#
#   benches/echo-callgrind.sh LABEL SERVER CONNS DEPTH SIZE
#
# SERVER is `corewire` (the echo_server example on its epoll backend, since io_uring does not
# run under valgrind: one shard, no idle spin), `tokio` (echo_tokio --current-thread), or a
# command with {addr} in it (leading VAR=VALUE words set its environment). `loadgen` (BIN_DIR, default $CARGO_TARGET_DIR/release) drives
# CONNS connections x DEPTH requests of SIZE bytes twice, for SHORT_MS (2000) and LONG_MS
# (6000), with the counters zeroed before and dumped after each: instructions per request are
# (Ir long - Ir short) / (requests long - requests short), so what a run costs whatever its
# length (connection set-up and close, requests left in flight at the window's end) cancels
# out. Under valgrind the server is the slow side, so each read finds more requests waiting
# than in a timing run: compare servers within one table, not with timing runs' batch sizes.
# Prints instructions per request; the callgrind dumps stay under $OUT (default
# /tmp/echo-callgrind).
set -euo pipefail
label=$1 server=$2 conns=$3 depth=$4 size=$5
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin=${BIN_DIR:-${CARGO_TARGET_DIR:-$repo/target}/release}
echo_server=${COREWIRE_ECHO:-$bin/examples/echo_server}
out=${OUT:-/tmp/echo-callgrind}
short_ms=${SHORT_MS:-2000} long_ms=${LONG_MS:-6000}
mkdir -p "$out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
case $server in
  corewire) cmd=(COREWIRE_BACKEND=epoll "$echo_server" --addr "$addr" --shards 1 --spin-us 0 --no-pin) ;;
  tokio) cmd=("$bin/echo_tokio" --addr "$addr" --current-thread) ;;
  *) read -ra cmd <<< "${server//\{addr\}/$addr}" ;;
esac
f=$out/$label-${conns}x${depth}x${size}.cg
rm -f "$f"*
# Leading VAR=VALUE words are the server's environment (valgrind does not follow `env`'s exec).
envs=()
while [[ ${cmd[0]} == *=* ]]; do envs+=("${cmd[0]}"); cmd=("${cmd[@]:1}"); done
env "${envs[@]}" valgrind --tool=callgrind --callgrind-out-file="$f" "${cmd[@]}" >"$out/vg-$label.log" 2>&1 &
vpid=$!
for _ in $(seq 1 300); do [[ -n "$(ss -Hltn "sport = :$port")" ]] && break; sleep 0.2; done
# measure MS DUMP: zero, run MS of load, dump (the DUMP-th dump): "Ir requests file".
measure() {
  callgrind_control -z $vpid >/dev/null 2>&1
  local json
  json=$("$bin/loadgen" --addr "$addr" --conns "$conns" --depth "$depth" --size "$size" \
    --warmup-ms 0 --duration-ms "$1")
  # Let the server see the connections close before the dump.
  sleep 1
  callgrind_control -d $vpid >/dev/null 2>&1
  local dump=$f.$2
  for _ in $(seq 1 50); do [[ -s $dump ]] && grep -q '^totals:' "$dump" && break; sleep 0.2; done
  local ir reqs
  ir=$(awk '/^summary:/ {print $2}' "$dump")
  reqs=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["requests"])' "$json")
  echo "$ir $reqs $dump"
}
read -r ir1 n1 d1 < <(measure "$short_ms" 1)
read -r ir2 n2 d2 < <(measure "$long_ms" 2)
kill $vpid; wait $vpid 2>/dev/null || true
printf "%-16s %4dx%-3d %5d B %8d Ir/req  (%d - %d requests; %s - %s)\n" "$label" "$conns" "$depth" \
  "$size" $(( (ir2 - ir1) / (n2 - n1) )) "$n2" "$n1" "$d2" "$d1"
