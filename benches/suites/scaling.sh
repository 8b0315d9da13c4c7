# Sourced by benches/run.sh (uses its build, run, free_port, wait_listen): the scaling suite.
#
# On N cores the servers get cores 0..n-1 and the load cores N/2..N/2+n-1, for
# n = 1, 2, 4, ... N/2 (SCALING_COUNTS overrides the list):
#   echo   benchctl scaling --shards n --workers n --threads n: corewire (n shards) vs tokio
#          multi-thread (n workers) vs monoio (n threads, one listener each), 64 conns per
#          shard x depth 4, 64 B and 4 KiB
#   kv     corewire-kv --shards n vs redis-server --io-threads n, load redis-benchmark
#          --threads n -c 64n -P 16 (SET, GET; p99 and p99.9 are redis-benchmark's
#          percentile buckets, the first at or above the percentile)
# Then one table: QPS (median of ROUNDS), per-shard efficiency QPS(n) / (n x QPS(1)), p99
# and p99.9.

scaling_cpus() { # first count -> "a-b" (or "a" for one)
    local first=$1 count=$2
    if (( count == 1 )); then echo "$first"; else echo "$first-$(( first + count - 1 ))"; fi
}

scaling_kv_one() { # server name, n, test, out file, port
    local name=$1 n=$2 test=$3 out=$4 port=$5 work=$6
    local cmd
    case "$name" in
        corewire-kv) cmd=("$COREWIRE_KV" --shards "$n" --port "$port") ;;
        redis-server) cmd=(redis-server --port "$port" --save "" --appendonly no
            --dir "$work" --io-threads "$n" --io-threads-do-reads yes) ;;
    esac
    local scpus ccpus
    scpus=$(scaling_cpus 0 "$n"); ccpus=$(scaling_cpus "$half" "$n")
    (cd "$work" && exec taskset -c "$scpus" "${cmd[@]}" >"$work/$name.log" 2>&1) &
    local pid=$!
    wait_listen "$port" "$pid" "$work/$name.log" || return 1
    local bench=(redis-benchmark -p "$port" -t "$test" -n "$(( kv_requests * n ))"
        -c "$(( 64 * n ))" -P 16 -r 100000 --threads "$n")
    echo "taskset -c $scpus ${cmd[*]}" >"$out"
    echo "taskset -c $ccpus ${bench[*]}" >>"$out"
    taskset -c "$ccpus" "${bench[@]}" >>"$out" 2>&1 || echo "redis-benchmark failed" >>"$out"
    kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
}

scaling() {
    build
    COREWIRE_KV="${COREWIRE_KV:-}"
    if [[ -z "$COREWIRE_KV" ]]; then
        (cd "$repo" && cargo build --release -p corewire-kv --bin corewire-kv >&2)
        COREWIRE_KV="$target/release/corewire-kv"
    fi
    COREWIRE_KV="$(realpath "$COREWIRE_KV")"
    command -v redis-benchmark >/dev/null ||
        { echo "run.sh: redis-benchmark not found (apt-get install redis-tools; cargo xtask setup)" >&2; return 1; }
    local cores; cores="${CORES:-$(nproc)}"
    half=$(( cores / 2 )); (( half >= 1 )) || half=1
    local counts=() c=1
    if [[ -n "${SCALING_COUNTS:-}" ]]; then
        IFS=, read -r -a counts <<<"$SCALING_COUNTS"
    else
        while (( c <= half )); do counts+=("$c"); c=$(( c * 2 )); done
    fi
    kv_requests="${KV_REQUESTS:-$([[ $quick == 1 ]] && echo 20000 || echo 1000000)}"
    local srounds="${ROUNDS:-$([[ $quick == 1 ]] && echo 1 || echo 3)}"
    local out="${SCALING_OUT:-$(mktemp -d)}"
    mkdir -p "$out"
    echo "# Scaling: $cores cores, server on cores 0..n-1, load on $half..$half+n-1, n = ${counts[*]}"
    echo "# raw output: $out"
    local n port=$(( port_base - 1 ))
    for n in "${counts[@]}"; do
        local sc=(--server-cpus "$(scaling_cpus 0 "$n")" --client-cpus "$(scaling_cpus "$half" "$n")"
            --shards "$n" --workers "$n" --threads "$n" --rounds "$srounds"
            --duration-ms "$duration" --warmup-ms "$warmup" --port-base "$port_base"
            --var "corewire_echo=$COREWIRE_ECHO" --json-out "$out/echo-n$n.jsonl")
        [[ -n "${SERVERS:-}" ]] && sc+=(--servers "$SERVERS")
        [[ -n "${WORKLOAD:-}" ]] && sc+=(--workload "$WORKLOAD")
        run "$BIN_DIR/benchctl" scaling "${sc[@]}" >"$out/echo-n$n.md"
        grep '^+ ' "$out/echo-n$n.md" || true
        local r test name
        for (( r = 1; r <= srounds; r++ )); do
            for test in set get; do
                for name in corewire-kv redis-server; do
                    port="$(free_port $(( port + 1 )))"
                    local work; work="$(mktemp -d)"
                    scaling_kv_one "$name" "$n" "$test" "$out/kv-$name-$test-n$n-r$r.txt" "$port" "$work" ||
                        echo "run.sh: $name with $n shards did not start" >&2
                    rm -rf "$work"
                done
            done
        done
        head -n 2 "$out/kv-corewire-kv-set-n$n-r1.txt" | sed 's/^/+ /'
    done
    echo
    python3 "$repo/benches/scaling_table.py" "$out"
}
