#!/bin/bash
# two-vm.sh faults [OUTDIR]
#
# The two-VM fault suite: a server VM and a client VM, each with rxe0 on
# its own virtio NIC (10.78.0.1 and 10.78.0.2), joined by a pair of UDP sockets on the host
# (qemu `-netdev socket,udp=...`: stateless, so a server VM booted again rejoins the link).
# The client (examples/rdma_faults.rs) keeps calls in flight and prints JSON lines; on its
# "steady" lines this script injects the faults:
#   1. server_kill: SIGKILL the server VM's qemu mid-stream; once the client has reported
#      the failure, boot a fresh server VM (the client reconnects to it);
#   2. link_cut: `set_link net0 off` on both VMs' qemu monitors for CUT_S seconds (longer
#      than the ~1.9 s retry budget), then on again (the client reconnects).
# Outputs (client.out/err, serverN.out/err, harness.jsonl) go to OUTDIR (default: a new
# /tmp/two-vm-faults.XXXXXX). Exit status: 0 if every check passed, 1 if one failed, 125 if
# a VM or the harness itself failed.
#
# Both VMs run under ONE hold of the VM lock that run-in-rxe-vm.sh takes (RXE_VM_NO_LOCK=1
# for the two guests it starts), with one vCPU each and no idle=poll: two TCG guests share
# the host's cores, so neither may spin.
#
# Knobs: CUT_S=10 (link cut length), RDMA_FAULTS_BIN (default: `cargo build --example
# rdma_faults`, the dev profile `cargo xtask test` has built the dependencies in), RXE_VM_*
# as for run-in-rxe-vm.sh.
set -u
HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=$(dirname "$HERE")
[ "${1:-}" = faults ] || { echo "usage: $0 faults [OUTDIR]" >&2; exit 125; }
OUT=${2:-$(mktemp -d /tmp/two-vm-faults.XXXXXX)}
mkdir -p "$OUT" || exit 125
CUT_S=${CUT_S:-10}
BIN=${RDMA_FAULTS_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/rdma_faults}
cd "$ROOT" || exit 125
if [ -z "${RDMA_FAULTS_BIN:-}" ]; then
  cargo build --example rdma_faults >&2 || { echo "two-vm: build failed" >&2; exit 125; }
fi
[ -x "$BIN" ] || { echo "two-vm: no $BIN" >&2; exit 125; }

W=$(mktemp -d /tmp/two-vm-run.XXXXXX)
now() { echo "$(date +%s.%N) - $T0" | bc; }
say() { # JSON line to harness.jsonl and stdout: say EVENT [k=v ...] (numbers or JSON values)
  local line="{\"harness\":\"$1\",\"t_s\":$(printf %.2f "$(now)")"; shift
  for kv in "$@"; do line="$line,\"${kv%%=*}\":${kv#*=}"; done
  echo "$line}" | tee -a "$OUT/harness.jsonl"
}
pids=(); cats=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done   # their trap stops qemu
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for p in "${cats[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$W"
}
trap cleanup EXIT
trap 'echo "two-vm: interrupted" >&2; exit 125' INT TERM HUP

# One hold of the machine's VM lock for both guests (see run-in-rxe-vm.sh).
exec 8>"${RXE_VM_LOCK:-/tmp/corewire-rxe-vm.run.lock}"
T0=$(date +%s.%N)
flock 8
LOCK_WAIT=$(now); T0=$(date +%s.%N)   # times below count from holding the lock
export RXE_VM_NO_LOCK=1 RXE_VM_NETDEV=nic RXE_VM_SMP=${RXE_VM_SMP:-1} \
  RXE_VM_IDLE_POLL=${RXE_VM_IDLE_POLL:-0} RXE_VM_MEM=${RXE_VM_MEM:-1024} \
  RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-900}
PORT=$((20000 + ($$ % 20000) * 2))   # host UDP ports of the link: server PORT, client PORT+1
SERVER=10.78.0.1:7878

# boot NAME IP MAC LOCAL_PORT REMOTE_PORT CMD... : starts a VM in the background, sets VM_PID
boot() {
  local name=$1 ip=$2 mac=$3 lport=$4 rport=$5; shift 5
  mkfifo "$W/$name.mon.in" "$W/$name.mon.out"
  cat "$W/$name.mon.out" > "$OUT/$name.monitor.log" &
  cats+=($!)
  RXE_VM_NAME=$name RXE_VM_IP=$ip RXE_VM_MAC=$mac RXE_VM_PIDFILE="$W/$name.pid" \
    RXE_VM_MONITOR="$W/$name.mon" \
    RXE_VM_NIC="socket,udp=127.0.0.1:$rport,localaddr=127.0.0.1:$lport" \
    "$HERE/run-in-rxe-vm.sh" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err" &
  VM_PID=$!
  pids+=("$VM_PID")
}
monitor() { # monitor NAME COMMAND: a line to that VM's qemu monitor
  timeout 5 bash -c "echo '$2' > '$W/$1.mon.in'" || say monitor_failed vm="\"$1\""
}
# wait_line PATTERN SECONDS: until the client prints a line matching PATTERN (fails early
# if the client VM has exited)
wait_line() {
  local deadline=$(( $(date +%s) + $2 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    grep -q -- "$1" "$OUT/client.out" 2>/dev/null && return 0
    kill -0 "$CLIENT" 2>/dev/null || { grep -q -- "$1" "$OUT/client.out" && return 0; return 1; }
    sleep 0.1
  done
  return 1
}
fail() { say failed why="\"$1\""; echo "two-vm: $1 (outputs in $OUT)" >&2; exit "${2:-1}"; }

say start out="\"$OUT\"" port=$PORT cut_s="$CUT_S" lock_wait_s="$(printf %.2f "$LOCK_WAIT")"
boot server1 10.78.0.1 52:54:00:78:00:01 "$PORT" $((PORT + 1)) "$BIN" server --listen "$SERVER"
SERVER1=$VM_PID
boot client 10.78.0.2 52:54:00:78:00:02 $((PORT + 1)) "$PORT" \
  "$BIN" client --connect "$SERVER" --faults server_kill,link_cut
CLIENT=$VM_PID

# ---- fault 1: the server VM dies mid-stream ----------------------------------------------
wait_line '"event":"steady","fault":"server_kill"' 600 || fail "client never reached steady state" 125
kill -9 "$(cat "$W/server1.pid")" 2>/dev/null || fail "could not kill the server VM" 125
say server_killed
wait "$SERVER1"; rc1=$?
say server1_exit rc="$rc1"
wait_line '"event":"fault","fault":"server_kill"' 120 || fail "client did not report the server kill"
say client_reported fault='"server_kill"'
boot server2 10.78.0.1 52:54:00:78:00:01 "$PORT" $((PORT + 1)) "$BIN" server --listen "$SERVER"
SERVER2=$VM_PID
say server2_booting

# ---- fault 2: the link is cut for longer than the retry budget, then restored --------------
wait_line '"event":"steady","fault":"link_cut"' 600 || fail "client did not reconnect to the new server"
monitor client "set_link net0 off"; monitor server2 "set_link net0 off"
cut_at=$(date +%s.%N)
say link_off
wait_line '"event":"fault","fault":"link_cut"' 120 || fail "client did not report the link cut"
say client_reported fault='"link_cut"'
left=$(echo "$CUT_S - ($(date +%s.%N) - $cut_at)" | bc)
[ "$(echo "$left > 0" | bc)" = 1 ] && sleep "$left"
monitor client "set_link net0 on"; monitor server2 "set_link net0 on"
say link_on cut_s="$(printf %.2f "$(echo "$(date +%s.%N) - $cut_at" | bc)")"

# ---- the end: the client reconnects, stops the server and reports ---------------------------
wait "$CLIENT"; rc_client=$?
say client_exit rc="$rc_client"
# (a polled wait, not a background `sleep`: that would hold our stdout open for xtask)
for _ in $(seq 600); do kill -0 "$SERVER2" 2>/dev/null || break; sleep 0.1; done
kill "$SERVER2" 2>/dev/null
wait "$SERVER2"; rc2=$?
say server2_exit rc="$rc2"
pids=()
# The server's side of the cut link: its two connections (the busy one and the idle one) had
# nothing left to resend once their replies were acknowledged, so only its keepalive probes
# could fail them; they must have, before the client reconnected (counted at its exit).
server_errors=$(grep '"event":"exit"' "$OUT/server2.out" | sed -n 's/.*"connection_errors":\([0-9]*\).*/\1/p')
say server2_connection_errors n="${server_errors:-null}"
if [ "${server_errors:-0}" -lt 2 ]; then
  fail "the server did not fail its connections of the cut link (connection_errors ${server_errors:-none}, want >= 2)"
fi
# server1 was killed (its runner reports 125: no exit code from the guest); server2 exits 0
# after the client's EXIT call.
if [ "$rc_client" = 0 ] && [ "$rc2" = 0 ] && [ "$rc1" != 0 ] && grep -q '"event":"done","ok":true' "$OUT/client.out"; then
  say passed; exit 0
fi
[ "$rc_client" = 125 ] || [ "$rc_client" = 124 ] && fail "the client VM failed (rc $rc_client)" 125
fail "a check failed (client rc $rc_client, server2 rc $rc2)"
