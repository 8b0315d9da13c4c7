#!/bin/sh
# corewire-kv replicating corewire-kv, over RDMA (`--repl-transport rdma` to the master's
# `--repl-rdma`) and over TCP, inside the rxe VM: the full sync's time (REPLICAOF at start to
# the link up with every key loaded) and the catch-up after a burst of writes (the burst's end
# to the replica's offset reaching the master's). Soft-RoCE under TCG: the figures compare the
# two transports on this emulation only, nothing about hardware.
#
#   cargo build --release -p corewire-kv
#   flock /tmp/rdma-vm.lock cargo xtask vm -- vm/bench/repl-rdma.sh [KEYS] [BURST]
#
# KV_BIN overrides the binary (default $CARGO_TARGET_DIR or target, release).
set -eu
KEYS=${1:-200000}
BURST=${2:-100000}
BIN=${KV_BIN:-${CARGO_TARGET_DIR:-target}/release/corewire-kv}
IP=10.77.0.1
MPORT=7301
RPORT=7302
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
ulimit -l unlimited
# Snapshots saved at exit land in the guest's tmpfs.
cd "$(mktemp -d)"

now() { cut -d' ' -f1 /proc/uptime; }
minus() { awk "BEGIN { printf \"%.2f\", $1 - $2 }"; }
field() { redis-cli -p "$1" info replication | tr -d '\r' | sed -n "s/^$2://p"; }
wait_ping() {
  i=0
  until redis-cli -p "$1" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 600 ] || { echo "no server on $1" >&2; exit 1; }; sleep 0.1
  done
}

measure() {
  transport=$1
  "$BIN" --port $MPORT --bind $IP 127.0.0.1 --shards 2 --protected-mode no \
    --repl-rdma $IP:$MPORT --rdma-poller event >/tmp/repl-m.out 2>/tmp/repl-m.err &
  master=$!
  wait_ping $MPORT
  redis-benchmark -p $MPORT -t set -n "$KEYS" -r "$KEYS" -d 100 -P 64 -q >/dev/null
  keys=$(redis-cli -p $MPORT dbsize)
  t0=$(now)
  "$BIN" --port $RPORT --shards 2 --repl-transport "$transport" --rdma-poller event \
    --replicaof $IP $MPORT >/tmp/repl-r.out 2>/tmp/repl-r.err &
  replica=$!
  wait_ping $RPORT
  until [ "$(field $RPORT master_link_status)" = up ] && \
        [ "$(redis-cli -p $RPORT dbsize)" = "$keys" ]; do sleep 0.05; done
  t1=$(now)
  redis-benchmark -p $MPORT -t set -n "$BURST" -r "$KEYS" -d 100 -P 16 -q >/dev/null
  t2=$(now)
  want=$(field $MPORT master_repl_offset)
  until [ "$(field $RPORT slave_repl_offset)" -ge "$want" ]; do sleep 0.02; done
  t3=$(now)
  echo "$transport keys=$keys full_sync_s=$(minus "$t1" "$t0") burst=$BURST" \
    "catch_up_s=$(minus "$t3" "$t2")" \
    "transport_seen=$(field $RPORT master_link_transport)"
  kill "$replica" "$master"
  wait "$replica" "$master" 2>/dev/null || true
}

measure tcp
measure rdma
measure tcp
measure rdma
