#!/usr/bin/env bash
# Start or stop a local Redis Cluster of corewire-kv nodes (or of redis-server nodes, the
# peer for benchmarks), formed with `redis-cli --cluster create` (no replicas).
#
#   examples/kv/cluster.sh start [--server corewire|redis] [--nodes 3] [--base-port 7000]
#                                [--dir DIR] [--bin PATH] [-- extra server arguments]
#   examples/kv/cluster.sh stop  [--dir DIR]
#   examples/kv/cluster.sh cpu   [--dir DIR]   # user+system CPU seconds of all nodes so far
#
# Node i listens on base-port+i (bus: +10000), keeps its nodes.conf and log in DIR/<port>/
# and its pid in DIR/<port>/pid. `start` returns once `redis-cli --cluster check` passes.
# Keep both ports below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range,
# usually from 32768): a client socket may hold a port inside it, and the node then cannot bind.
# corewire-kv defaults: --shards 1 --bind 127.0.0.1; add e.g. `-- --shards 2 --pin` to change.
# Examples:
#   cargo build --release -p corewire-kv
#   examples/kv/cluster.sh start --nodes 3 --base-port 7000 --dir /tmp/cw-cluster
#   redis-cli -c -p 7000 set foo bar
#   redis-benchmark --cluster -p 7000 -t set,get -n 1000000 -q
#   examples/kv/cluster.sh stop --dir /tmp/cw-cluster
set -euo pipefail

cmd=${1:-}
[ -n "$cmd" ] && shift || true
server=corewire nodes=3 base=7000 dir=/tmp/corewire-kv-cluster
bin=$(cd "$(dirname "$0")/../.." && pwd)/target/release/corewire-kv
extra=()
while [ $# -gt 0 ]; do
    case $1 in
        --server) server=$2; shift 2 ;;
        --nodes) nodes=$2; shift 2 ;;
        --base-port) base=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

stop() {
    for pidfile in "$dir"/*/pid; do
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
}

cpu() {
    local ticks=0 hz
    hz=$(getconf CLK_TCK)
    for pidfile in "$dir"/*/pid; do
        [ -f "$pidfile" ] || continue
        # utime and stime: fields 14 and 15 of /proc/PID/stat (the name in field 2 has no spaces)
        read -r -a stat <"/proc/$(cat "$pidfile")/stat"
        ticks=$((ticks + stat[13] + stat[14]))
    done
    awk -v t="$ticks" -v hz="$hz" 'BEGIN { printf "%.2f\n", t / hz }'
}

start() {
    mkdir -p "$dir"
    addrs=()
    for i in $(seq 0 $((nodes - 1))); do
        port=$((base + i))
        node="$dir/$port"
        mkdir -p "$node"
        rm -f "$node/nodes.conf" "$node/ready"
        case $server in
            corewire)
                "$bin" --port "$port" --bind 127.0.0.1 --shards 1 --cluster-enabled yes \
                    --cluster-config-file "$node/nodes.conf" "${extra[@]}" \
                    >"$node/ready" 2>"$node/log" &
                echo $! >"$node/pid"
                for _ in $(seq 300); do grep -q "corewire-kv ready" "$node/ready" && break; sleep 0.1; done
                grep -q "corewire-kv ready" "$node/ready" || { cat "$node/log"; exit 1; } ;;
            redis)
                redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
                    --cluster-config-file "$node/nodes.conf" --dir "$node" --save '' \
                    --appendonly no "${extra[@]}" >"$node/log" 2>&1 &
                echo $! >"$node/pid"
                for _ in $(seq 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
                redis-cli -p "$port" ping >/dev/null 2>&1 || {
                    echo "cluster.sh: redis-server on port $port did not come up; its log:" >&2
                    cat "$node/log" >&2; exit 1; } ;;
            *) echo "cluster.sh: --server corewire|redis" >&2; exit 2 ;;
        esac
        addrs+=("127.0.0.1:$port")
    done
    redis-cli --cluster create "${addrs[@]}" --cluster-yes >"$dir/create.log"
    for _ in $(seq 150); do
        check=$(redis-cli --cluster check "127.0.0.1:$base" 2>&1 || true)
        ok=0
        for i in $(seq 0 $((nodes - 1))); do
            redis-cli -p $((base + i)) cluster info 2>/dev/null | grep -q "cluster_state:ok" && ok=$((ok + 1))
        done
        if [ "$ok" = "$nodes" ] && grep -q "All nodes agree" <<<"$check" &&
            grep -q "All 16384 slots covered" <<<"$check"; then
            echo "cluster.sh: $server cluster of $nodes nodes on ports $base..$((base + nodes - 1)) ready ($dir)"
            return 0
        fi
        sleep 0.2
    done
    cat "$dir/create.log"
    exit 1
}

case $cmd in
    start) start ;;
    stop) stop ;;
    cpu) cpu ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
esac
