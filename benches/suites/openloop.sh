# Sourced by benches/run.sh (uses its build, run, free_port, wait_listen): the open-loop suite.
#
# Each server alone on SERVER_CPU, the `openloop` client on CLIENT_CPU: first its maximum
# throughput (the same client, closed loop: OPENLOOP_CONNS connections x OPENLOOP_DEPTH in
# flight), then fixed rates of 25/50/75/90 % of it (LOADS), each request's latency counted from
# its intended send time (no coordinated omission). Peers in the same run: echo 64 B corewire
# (1 shard) vs tokio current-thread; KV SET/GET (64 B values) corewire-kv (1 shard) vs
# redis-server; RPC 64 B unary echo calls in corewire's framing, rpc_corewire (1 shard) vs the
# same framing on tokio current-thread (echo_tokio --rpc). OPENLOOP_BENCHES picks benches
# (default echo,kv,rpc). ROUNDS interleaved rounds (default 5); the table holds medians.

openloop_one() { # bench server-name round out -- server command...
    local bench=$1 name=$2 round=$3 out=$4; shift 5
    local port; port="$(free_port "$ol_port")"; ol_port=$(( port + 1 ))
    local log; log="$(mktemp)"
    local cmd=("$@")
    cmd=("${cmd[@]//@PORT@/$port}")
    (cd "$ol_work" && exec taskset -c "$server_cpu" "${cmd[@]}" >"$log" 2>&1) &
    local pid=$!
    if ! wait_listen "$port" "$pid" "$log"; then
        kill "$pid" 2>/dev/null; return 1
    fi
    local proto=$bench
    [[ $bench == kv ]] && proto=resp
    local client=(taskset -c "$client_cpu" "$BIN_DIR/openloop" --addr "127.0.0.1:$port"
        --proto "$proto" --size 64 --conns "$ol_conns" --duration-ms "$duration"
        --warmup-ms "$warmup")
    if (( round == 1 )); then
        echo "+ taskset -c $server_cpu $(printf '%q ' "${cmd[@]}")"
        echo "+ ${client[*]} --max-in-flight $ol_depth --rate 0"
        echo "+ ${client[*]} --max-in-flight 256 --rate R"
    fi
    local rep max pct
    rep="$("${client[@]}" --max-in-flight "$ol_depth" --rate 0)" || true
    printf '{"bench":"%s","server":"%s","round":%s,"load_pct":100,"closed":true,"report":%s}\n' \
        "$bench" "$name" "$round" "${rep:-null}" >>"$out"
    max="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["qps"])' "${rep:-{\}}" 2>/dev/null || echo 0)"
    for pct in "${loads[@]}"; do
        local rate; rate="$(python3 -c "print(round($max * $pct / 100))")"
        (( rate > 0 )) || continue
        rep="$("${client[@]}" --max-in-flight 256 --rate "$rate")" || true
        printf '{"bench":"%s","server":"%s","round":%s,"load_pct":%s,"closed":false,"report":%s}\n' \
            "$bench" "$name" "$round" "$pct" "${rep:-null}" >>"$out"
    done
    kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
    rm -f "$log"
}

openloop() {
    build
    local benches=",${OPENLOOP_BENCHES:-echo,kv,rpc},"
    COREWIRE_KV="${COREWIRE_KV:-}"
    if [[ -z "$COREWIRE_KV" && $benches == *,kv,* ]]; then
        (cd "$repo" && cargo build --release -p corewire-kv --bin corewire-kv >&2)
        COREWIRE_KV="$target/release/corewire-kv"
    fi
    [[ -z "$COREWIRE_KV" ]] || COREWIRE_KV="$(realpath "$COREWIRE_KV")"
    local rounds_ol="${ROUNDS:-$([[ $quick == 1 ]] && echo 1 || echo 5)}"
    ol_conns="${OPENLOOP_CONNS:-16}"; ol_depth="${OPENLOOP_DEPTH:-16}"
    IFS=, read -r -a loads <<<"${LOADS:-25,50,75,90}"
    ol_port="$port_base"
    ol_work="$(mktemp -d)"
    local out="${OPENLOOP_OUT:-$ol_work/openloop.jsonl}"
    : >"$out"
    echo "# Open loop: server on CPU $server_cpu, openloop on CPU $client_cpu, $ol_conns conns; rounds $rounds_ol"
    local r
    for (( r = 1; r <= rounds_ol; r++ )); do
        if [[ $benches == *,echo,* ]]; then
            openloop_one echo corewire "$r" "$out" -- "$COREWIRE_ECHO" --addr 127.0.0.1:@PORT@ --shards 1
            openloop_one echo tokio-ct "$r" "$out" -- "$BIN_DIR/echo_tokio" --addr 127.0.0.1:@PORT@ --current-thread
        fi
        if [[ $benches == *,kv,* ]]; then
            openloop_one kv corewire-kv "$r" "$out" -- "$COREWIRE_KV" --shards 1 --port @PORT@
            if command -v redis-server >/dev/null; then
                openloop_one kv redis-server "$r" "$out" -- redis-server --port @PORT@ --save "" --appendonly no
            else
                echo "redis-server not found: apt-get install redis-server (cargo xtask setup)" >&2
            fi
        fi
        if [[ $benches == *,rpc,* ]]; then
            openloop_one rpc corewire "$r" "$out" -- "$BIN_DIR/rpc_corewire" server --addr 127.0.0.1:@PORT@ --shards 1 --no-pin
            openloop_one rpc tokio-ct "$r" "$out" -- "$BIN_DIR/echo_tokio" --addr 127.0.0.1:@PORT@ --current-thread --rpc
        fi
    done
    echo
    python3 "$repo/benches/openloop_table.py" "$out"
    [[ -n "${OPENLOOP_OUT:-}" ]] || rm -rf "$ol_work"
}
