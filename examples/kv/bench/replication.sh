#!/usr/bin/env bash
# Persistence and replication: corewire-kv (1 shard) vs redis-server 7.0 as masters holding the
# same N keys (16 B `key:%012d`, 32 B values), both pinned to SERVER_CPU (0); clients and the
# replica (a redis-server, the same for both masters) on CLIENT_CPU (1). Rounds interleave the
# two servers; the table holds medians.
#
#   save   BGSAVE (corewire-kv: no fork, each shard walks a point-in-time snapshot; redis:
#          fork): wall time from BGSAVE to `rdb_bgsave_in_progress:0`, MB/s of RDB written,
#          the memory the save adds (the server's RSS peak minus before, plus a fork child's
#          private pages), GET latency at depth 1 from one client before and during the save
#   sync   a fresh `redis-server --replicaof` the master: seconds until its
#          `master_link_status:up` and until it holds N keys (1,000 random keys compared), the
#          master's RSS growth meanwhile. The redis master runs with `repl-diskless-sync yes`
#          (7.0's default) and `repl-diskless-sync-delay 0` (its default 5 s would only wait)
#   lag    a synced replica, then `redis-benchmark -t set -n LAG_REQUESTS -r N -d 32 -P 16
#          -c 50` on the master: master_repl_offset - the replica's slave_repl_offset sampled
#          every 50 ms, in bytes and in time (how long before the sample the master had
#          reached the replica's offset), and how long after the load the replica caught up
#
# The data is loaded once (`redis-cli --pipe` into redis-server, its SAVE copied to corewire-kv's
# dir and loaded at its start). Memory: both masters, a replica and the RDB files at once
# (about 4 GB and 2 GB of /tmp at 10 M keys); the work directory is removed at the end.
#
# Usage: examples/kv/bench/replication.sh [--keys N (1000000)] [--rounds R (3)]
#            [--lag-requests M (2000000)] [--parts save,sync,lag] [--no-build]
# Environment: SERVER_CPU (0), CLIENT_CPU (1), COREWIRE_KV (path; default: build, release),
# COREWIRE_KV_ARGS (extra corewire-kv flags), TMPDIR (where the RDB files go).
set -euo pipefail

keys=1000000
rounds=3
lag_requests=2000000
parts=save,sync,lag
build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --keys) keys="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --lag-requests) lag_requests="$2"; shift 2 ;;
        --parts) parts="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "replication.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
server_cpu="${SERVER_CPU:-0}"
client_cpu="${CLIENT_CPU:-1}"

for tool in redis-benchmark redis-server redis-cli python3 taskset; do
    command -v "$tool" >/dev/null || { echo "replication.sh: $tool not found (apt-get install redis-tools redis-server)" >&2; exit 1; }
done
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=kv-binary.sh
source "$here/kv-binary.sh"
[[ -x "$kv" ]] || { echo "replication.sh: $kv missing" >&2; exit 1; }
probe=(python3 "$here/repl_probe.py")

work="$(mktemp -d)"
declare -A pid port
cleanup() {
    for p in "${pid[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cli() { local name="$1"; shift; taskset -c "$client_cpu" redis-cli -p "${port[$name]}" "$@"; }
declare -a cmds=()

# Starts master $1 (corewire-kv or redis-server) with its data in $work/$1.
start() {
    local name="$1" cmd
    port[$name]="$(free_port)"
    mkdir -p "$work/$name"
    if [[ $name == corewire-kv ]]; then
        # shellcheck disable=SC2206 # COREWIRE_KV_ARGS is split into flags on purpose
        cmd=("$kv" --shards 1 --port "${port[$name]}" --dir "$work/$name" --save "" ${COREWIRE_KV_ARGS:-})
    else
        cmd=(redis-server --port "${port[$name]}" --dir "$work/$name" --save "" --appendonly no
            --repl-diskless-sync yes --repl-diskless-sync-delay 0)
    fi
    cmds+=("taskset -c $server_cpu $(printf '%q ' "${cmd[@]}" | sed "s|$work|WORK|g")")
    taskset -c "$server_cpu" "${cmd[@]}" >"$work/$name.log" 2>&1 &
    pid[$name]=$!
    for _ in $(seq 1 3000); do
        [[ "$(cli "$name" dbsize 2>/dev/null)" =~ ^[0-9]+$ ]] && return 0
        sleep 0.1
    done
    echo "replication.sh: $name did not come up: $(tail -3 "$work/$name.log")" >&2
    exit 1
}
wait_keys() {
    for _ in $(seq 1 6000); do
        [[ "$(cli "$1" dbsize 2>/dev/null)" == "$keys" ]] && return 0
        sleep 0.1
    done
    echo "replication.sh: $1 does not hold $keys keys: $(cli "$1" dbsize 2>&1)" >&2
    exit 1
}

echo "loading $keys keys ..." >&2
mkdir -p "$work/corewire-kv" "$work/redis-server"
start redis-server
"${probe[@]}" gen "$keys" | taskset -c "$client_cpu" redis-cli -p "${port[redis-server]}" --pipe >"$work/pipe.out"
wait_keys redis-server
cli redis-server save >/dev/null
cp "$work/redis-server/dump.rdb" "$work/corewire-kv/dump.rdb"
start corewire-kv
wait_keys corewire-kv
rm -f "$work/corewire-kv/dump.rdb"

replica_cmd() { # name round part: sets $replica, a replica command line for master $1
    local dir="$work/replica.$3.$1.$2"
    mkdir -p "$dir"
    replica=(taskset -c "$client_cpu" redis-server --port "$(free_port)" --dir "$dir" --save ""
        --appendonly no --replicaof 127.0.0.1 "${port[$1]}")
}
cmds+=("taskset -c $client_cpu redis-server --port PORT --dir WORK/replica --save '' --appendonly no --replicaof 127.0.0.1 MASTER_PORT")
load=(taskset -c "$client_cpu" redis-benchmark -t set -n "$lag_requests" -r "$keys" -d 32 -P 16 -c 50 -q)
cmds+=("${load[*]} -p MASTER_PORT")

for part in save sync lag; do
    [[ ",$parts," == *",$part,"* ]] || continue
    for round in $(seq 1 "$rounds"); do
        for name in corewire-kv redis-server; do
            echo "$part round $round: $name" >&2
            out="$work/$part.$name.$round"
            case "$part" in
                save)
                    "${probe[@]}" save "${port[$name]}" "${pid[$name]}" "$keys" \
                        "$work/$name/dump.rdb" >"$out"
                    rm -f "$work/$name/dump.rdb"
                    ;;
                sync)
                    replica_cmd "$name" "$round" sync
                    "${probe[@]}" sync "${port[$name]}" "${pid[$name]}" "$keys" -- \
                        "${replica[@]}" >"$out"
                    ;;
                lag)
                    replica_cmd "$name" "$round" lag
                    "${probe[@]}" lag "${port[$name]}" "${pid[$name]}" "$keys" -- \
                        "${replica[@]}" -- "${load[@]}" -p "${port[$name]}" >"$out"
                    ;;
            esac
            cat "$out" >&2
        done
    done
done

echo "# Persistence and replication: corewire-kv (1 shard) vs redis-server, $keys keys"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(redis-server --version | awk '{ print $3 }'), masters on CPU $server_cpu, clients and the replica on CPU $client_cpu, $rounds rounds"
echo
"${probe[@]}" table "$work"
echo
echo "Commands (WORK: a temporary directory; PORT: a free port):"
echo "    examples/kv/bench/replication.sh --keys $keys --rounds $rounds --lag-requests $lag_requests --parts $parts"
printf '    %s\n' "${cmds[@]}"
echo "    repl_probe.py gen $keys | taskset -c $client_cpu redis-cli -p PORT --pipe; redis-cli SAVE (copied to corewire-kv's dir)"
