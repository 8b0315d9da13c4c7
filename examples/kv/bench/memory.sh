#!/usr/bin/env bash
# Memory: corewire-kv (1 shard) vs redis-server 7.0, both pinned to SERVER_CPU (0), clients on
# CLIENT_CPU (1), the same keys, in the same run. RSS is VmRSS from /proc; used_memory is each
# server's own `INFO memory` figure (its allocator's count of the heap it holds).
#
#   pipe     `redis-cli --pipe` of N `SET key:%012d <32 B value>` into a fresh server: RSS of
#            the empty server, right after the load and after SETTLE_S (5) s; then FLUSHALL
#            and RSS again after SETTLE_S s (compared with the empty server's)
#   bench    `redis-benchmark -t set -n N -r N -d 32 -P 16 -c 50` into a fresh server (16 B
#            keys `key:000000xxxxxx`; -r draws keys at random, so about 63 % are distinct):
#            RSS after the load and after SETTLE_S s, bytes per key (RSS delta / DBSIZE)
#   idle     CONNS (5000) idle connections (each after one PING) to a fresh server:
#            (RSS with them open, after SETTLE_S s - RSS before) / CONNS
#
# Prints one markdown table: each figure for both servers and corewire-kv's ratio to redis's.
#
# Usage: examples/kv/bench/memory.sh [--keys N (1000000)] [--big-keys N (0: skip; e.g.
#            10000000 adds a second bench load)] [--conns C (5000)] [--settle S (5)]
#            [--quick] [--no-build]
#   --quick = --keys 100000 --conns 500 --settle 2 (smoke run)
# Environment: SERVER_CPU (0), CLIENT_CPU (1), COREWIRE_KV (path; default: build, release),
# COREWIRE_KV_ARGS (extra corewire-kv flags).
set -euo pipefail

keys=1000000
big_keys=0
conns=5000
settle=5
build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --keys) keys="$2"; shift 2 ;;
        --big-keys) big_keys="$2"; shift 2 ;;
        --conns) conns="$2"; shift 2 ;;
        --settle) settle="$2"; shift 2 ;;
        --quick) keys=100000; conns=500; settle=2; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "memory.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
server_cpu="${SERVER_CPU:-0}"
client_cpu="${CLIENT_CPU:-1}"

for tool in redis-benchmark redis-server redis-cli python3; do
    command -v "$tool" >/dev/null || { echo "memory.sh: $tool not found (apt-get install redis-tools redis-server)" >&2; exit 1; }
done
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=kv-binary.sh
source "$here/kv-binary.sh"
[[ -x "$kv" ]] || { echo "memory.sh: $kv missing" >&2; exit 1; }
ulimit -n $(( conns * 2 + 4096 )) 2>/dev/null || ulimit -n "$(ulimit -Hn)"

work="$(mktemp -d)"
spid=""
cleanup() {
    [[ -n "$spid" ]] && kill "$spid" 2>/dev/null
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cli() { taskset -c "$client_cpu" redis-cli -p "$port" "$@"; }
used_kib() { cli info memory | tr -d '\r' | awk -F: '/^used_memory:/ { print int($2 / 1024) }'; }
declare -a cmds=()

# Starts server $1 (corewire-kv or redis-server) fresh on a new port: sets $spid and $port.
start() {
    port="$(free_port)"
    local cmd
    if [[ $1 == corewire-kv ]]; then
        # shellcheck disable=SC2206 # COREWIRE_KV_ARGS is split into flags on purpose
        cmd=("$kv" --shards 1 --port "$port" --maxclients $(( conns + 100 )) ${COREWIRE_KV_ARGS:-})
    else
        rm -rf "$work/redis" && mkdir -p "$work/redis"
        cmd=(redis-server --port "$port" --save "" --appendonly no --dir "$work/redis"
            --maxclients $(( conns + 100 )))
    fi
    cmds+=("taskset -c $server_cpu $(printf '%q ' "${cmd[@]}")")
    taskset -c "$server_cpu" "${cmd[@]}" >"$work/$1.log" 2>&1 &
    spid=$!
    for _ in $(seq 1 100); do
        cli ping >/dev/null 2>&1 && { sleep 0.5; return 0; }
        sleep 0.1
    done
    echo "memory.sh: $1 did not come up: $(tail -3 "$work/$1.log")" >&2
    exit 1
}
stop() { kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; spid=""; }

# The --pipe input: N SETs in RESP, 16 B keys and 32 B values (written once, for both).
pipe_file="$work/pipe.resp"
python3 - "$keys" "$pipe_file" <<'EOF'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
value = b"v" * 32
with open(path, "wb", buffering=1 << 20) as f:
    for i in range(n):
        f.write(b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$32\r\n%s\r\n" % (i, value))
EOF

# Figures, by "server:metric", in KiB unless said otherwise.
declare -A fig
for name in corewire-kv redis-server; do
    # (a) + (c): the --pipe bulk load, then FLUSHALL.
    start "$name"
    fig[$name:empty]="$(rss_kib "$spid")"
    fig[$name:used_empty]="$(used_kib)"
    taskset -c "$client_cpu" redis-cli -p "$port" --pipe <"$pipe_file" >"$work/pipe.out"
    fig[$name:pipe]="$(rss_kib "$spid")"
    sleep "$settle"
    fig[$name:pipe_settled]="$(rss_kib "$spid")"
    fig[$name:used_pipe]="$(used_kib)"
    fig[$name:dbsize_pipe]="$(cli dbsize)"
    cli flushall >/dev/null
    sleep "$settle"
    fig[$name:flushed]="$(rss_kib "$spid")"
    fig[$name:used_flushed]="$(used_kib)"
    stop

    # (b): redis-benchmark loads.
    for n in "$keys" $([[ $big_keys -gt 0 ]] && echo "$big_keys"); do
        start "$name"
        load_before="$(rss_kib "$spid")"
        cmds+=("taskset -c $client_cpu redis-benchmark -p PORT -t set -n $n -r $n -d 32 -P 16 -c 50 -q")
        taskset -c "$client_cpu" redis-benchmark -p "$port" -t set -n "$n" -r "$n" -d 32 -P 16 \
            -c 50 -q >"$work/bench.out" 2>&1
        fig[$name:bench$n]="$(rss_kib "$spid")"
        sleep "$settle"
        fig[$name:bench${n}_settled]="$(rss_kib "$spid")"
        fig[$name:used_bench$n]="$(used_kib)"
        dbsize="$(cli dbsize)"
        fig[$name:dbsize_bench$n]="$dbsize"
        fig[$name:perkey_bench$n]=$(( (fig[$name:bench${n}_settled] - load_before) * 1024 / dbsize ))
        stop
    done

    # (d): idle connections.
    start "$name"
    before="$(rss_kib "$spid")"
    coproc IDLE { exec taskset -c "$client_cpu" python3 "$repo/benches/idle_conns.py" "$port" "$conns" resp; }
    ready=""
    read -r ready <&"${IDLE[0]}" || true
    sleep "$settle"
    after="$(rss_kib "$spid")"
    exec {IDLE[1]}>&-
    wait "$IDLE_PID" 2>/dev/null || true
    if [[ "$ready" != "ready $conns" ]]; then
        echo "memory.sh: $name: idle connections: ${ready:-client gave up}" >&2
        fig[$name:idle]=0
    else
        fig[$name:idle]=$(( (after - before) * 1024 / conns ))
    fi
    stop
done

mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
row() { # label, metric, unit (mib|bytes)
    local a="${fig[corewire-kv:$2]}" b="${fig[redis-server:$2]}"
    if [[ $3 == mib ]]; then
        echo "| $1 | $(mib "$a") | $(mib "$b") | $(ratio "$a" "$b") |"
    else
        echo "| $1 | $a | $b | $(ratio "$a" "$b") |"
    fi
}
echo "# Memory: corewire-kv (1 shard) vs redis-server, $keys keys"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(redis-server --version | awk '{ print $3 }'), server on CPU $server_cpu, clients on CPU $client_cpu"
echo
echo "| figure | corewire-kv | redis-server | ratio |"
echo "| --- | --- | --- | --- |"
row "empty server RSS (MiB)" empty mib
row "--pipe $keys SETs: RSS right after (MiB)" pipe mib
row "--pipe: RSS after ${settle} s (MiB)" pipe_settled mib
row "--pipe: used_memory (MiB)" used_pipe mib
row "--pipe: keys" dbsize_pipe bytes
row "after FLUSHALL + ${settle} s: RSS (MiB)" flushed mib
row "after FLUSHALL: used_memory (MiB)" used_flushed mib
row "empty server used_memory (MiB)" used_empty mib
for n in "$keys" $([[ $big_keys -gt 0 ]] && echo "$big_keys"); do
    row "redis-benchmark -n $n: RSS right after (MiB)" "bench$n" mib
    row "redis-benchmark -n $n: RSS after ${settle} s (MiB)" "bench${n}_settled" mib
    row "redis-benchmark -n $n: used_memory (MiB)" "used_bench$n" mib
    row "redis-benchmark -n $n: keys" "dbsize_bench$n" bytes
    row "redis-benchmark -n $n: RSS bytes per key" "perkey_bench$n" bytes
done
row "idle connection: RSS bytes each ($conns)" idle bytes
for name in corewire-kv redis-server; do
    a="${fig[$name:flushed]}" b="${fig[$name:empty]}"
    echo
    echo "$name after FLUSHALL: $(ratio "$a" "$b")x the empty server's RSS"
done
echo
echo "Commands (PORT: a free port per server start):"
printf '    %s\n' "${cmds[@]}" | sort -u
echo "    taskset -c $client_cpu redis-cli -p PORT --pipe < (N x SET key:%012d <32 B>)"
echo "    taskset -c $client_cpu benches/idle_conns.py PORT $conns resp"
