#!/usr/bin/env bash
# One command per benchmark suite; each prints its figures and the commands that produced them.
#
#   benches/run.sh percore     per-core echo: server alone on SERVER_CPU, loadgen on
#                              CLIENT_CPU; corewire (1 shard; on io_uring, and as corewire-epoll
#                              on its epoll backend) vs tokio current-thread, monoio,
#                              glommio (1 executor) and the raw io_uring kernel floor; 64 and 256
#                              conns x depth 4, 64 B and 4 KiB. A timing pass (medians of ROUNDS
#                              interleaved rounds), then a shorter pass with perf counting the
#                              server's io_uring enters and syscalls per request (perf adds a
#                              tracepoint hit per syscall, so those figures come from their own pass).
#   benches/run.sh idle-memory RSS per idle connection: IDLE_CONNS (10000) connections,
#                              each after one exchange, to corewire's echo server (1 shard),
#                              corewire-kv (1 shard), both again on the epoll backend
#                              (corewire-echo-epoll, corewire-kv-epoll) and redis-server, in the
#                              same run;
#                              (VmRSS with them open - VmRSS before) / N. Raises nofile.
#   benches/run.sh rpc         RPC per core: corewire RPC vs corewire raw echo vs tonic,
#                              one shard / worker on SERVER_CPU, client on CLIENT_CPU; 1 conn and
#                              64 conns x depth 4, 64 B and 4 KiB; ratios to the raw echo and to
#                              tonic (plus allocations / task polls per request where the corewire
#                              RPC client reports them).
#   benches/run.sh fairness    fairness under hot connections: the corewire RPC echo service with a
#                              handler cost (HASH_ROUNDS, default 32 FNV-1a passes per message),
#                              1 shard on SERVER_CPU, client on CLIENT_CPU; 8 hot conns x depth
#                              256 on one listener + 1 probe at depth 1 on its own listener;
#                              budgets BUDGETS (unlimited,256,64,32,16,4): probe p50/p99/p99.9,
#                              the probe's head-of-line count (messages the shard handled while
#                              a probe request waited), hot throughput, server and client CPU %
#                              (the client must stay well below 100 x its threads). SERVERS=corewire
#                              runs the raw echo example instead (no handler cost, no HOL);
#                              FAIRNESS_ARGS adds benchctl flags.
#   benches/run.sh kv-fairness the same layout over corewire-kv: 1 shard on SERVER_CPU,
#                              8 connections pipelining MSET/MGET batches + 1 probe GET, budgets
#                              unlimited,default (examples/kv/bench/fairness.sh; KV_FAIRNESS_ARGS
#                              adds its flags, QUICK=1 its --quick)
#   benches/run.sh kv-memory   corewire-kv vs redis-server memory (examples/kv/bench/memory.sh):
#                              RSS after a 1 M-key redis-cli --pipe load, after redis-benchmark
#                              SET loads, after FLUSHALL, per idle connection; QUICK=1 its
#                              --quick, KV_MEMORY_ARGS adds its flags
#   benches/run.sh tls         the cost of TLS: corewire-kv vs redis-server over TLS
#                              (examples/kv/bench/tls.sh: redis-benchmark --tls SET/GET at -P 1
#                              and -P 16, server CPU per request, new handshakes/s with -k 0;
#                              TLS_ARGS adds its flags), then echo and RPC over TCP and TLS on one
#                              server shard (examples/tls_bench.rs: requests/s and server CPU
#                              µs per request; TLS_BENCH_ARGS adds its flags)
#   benches/run.sh acl         the ACL check's cost (examples/kv/bench/acl.sh): corewire-kv, 1 shard,
#                              -P 16 SET/GET as the default user vs a user with key patterns;
#                              requests/s and server CPU per request, and their ratio
#   benches/run.sh rdma-fairness the fairness layout over RDMA, in the soft-RoCE VM:
#                              builds examples/rdma_fairness (release), then
#                              `cargo xtask vm -- vm/bench/rdma-fairness.sh`: 1 server shard (CQ
#                              poller polling; event for EVENT_BUDGETS), 8 hot x depth 256 + 1
#                              probe, budgets BUDGETS (unlimited,64,32,16,4), HASH_ROUNDS (32);
#                              probe latency and HOL, hot msgs/s, most receive CQEs one connection
#                              took per poller pass and most frames it handed up per round.
#                              ROUNDS (3 here), DUR_MS (4000), WARMUP_MS; QUICK=1: 1 round, 1 s
#   benches/run.sh scaling     throughput as shards are added (benches/suites/scaling.sh): on N
#                              cores, servers on cores 0..n-1 and load on N/2..N/2+n-1 for
#                              n = 1, 2, 4 .. N/2; echo 64 B and 4 KiB: corewire vs tokio
#                              multi-thread vs monoio (n threads); corewire-kv vs redis-server
#                              --io-threads n under redis-benchmark --threads n; QPS, per-shard
#                              efficiency QPS(n)/(n x QPS(1)), p99, p99.9. ROUNDS (3),
#                              SCALING_COUNTS (1,2,4..), KV_REQUESTS (10^6 per shard),
#                              SCALING_OUT (raw output folder; default a temporary one)
#   benches/run.sh openloop    tail latency at fixed rates (benches/suites/openloop.sh): each
#                              server on SERVER_CPU, the openloop client on CLIENT_CPU; its max
#                              (closed loop), then 25/50/75/90 % of it (LOADS), latency from
#                              each request's intended send time; echo corewire vs tokio-ct,
#                              KV SET/GET corewire-kv vs redis-server; RPC echo calls in
#                              corewire's framing, rpc_corewire vs the same framing on
#                              tokio-ct (echo_tokio --rpc); OPENLOOP_BENCHES (echo,kv,rpc),
#                              OPENLOOP_CONNS (16), OPENLOOP_DEPTH (16, the closed loop's),
#                              OPENLOOP_OUT (raw lines)
#   benches/run.sh grpc        gRPC per core: corewire's gRPC server (the echo generated
#                              from benches/proto/echo.proto) vs tonic's on the same proto and
#                              handler, server on SERVER_CPU, load on CLIENT_CPU, 64 conns x 4
#                              streams, 64 B and 4 KiB: first with tonic's client as the load
#                              (benchctl, QPS and server CPU per request), then with h2load
#                              (nghttp2-client: a generator that is neither side's) posting a
#                              gRPC-framed body (ROUNDS interleaved rounds, medians); then
#                              typed calls vs the raw Service over corewire's framing (benchctl rpc, corewire-typed vs corewire-rpc)
#
# Environment:
#   QUICK=1          smoke run: 1 round, 200 ms windows (proves the suite works; no figures)
#   ROUNDS (5)  DURATION_MS (2000)  WARMUP_MS (500)
#   SERVER_CPU (0)  CLIENT_CPU (1)
#   SERVERS          comma list (percore default corewire,corewire-epoll,tokio-ct,monoio,
#                    glommio-1,floor;
#                    fairness: corewire-rpc)
#   BUDGETS, HASH_ROUNDS  fairness: budgets compared, handler cost
#   EXTRA_SERVERS    percore: more server templates, ';'-separated NAME=TEMPLATE (name them in
#                    SERVERS too), e.g. an older build as a peer:
#                    'pre=/tmp/old/echo_server --addr {addr} --shards {shards}'
#   WORKLOAD         only workloads whose label contains this (e.g. '256 conn')
#   BIN_DIR          where benchctl, loadgen and the peers are (default: build them, release)
#   COREWIRE_ECHO    corewire's echo_server example (default: built with the peers)
#   COREWIRE_KV      corewire-kv (default: built, release)
#   JSON_OUT         append every raw measurement here
#   PORT_BASE (20000) first port the servers may take (below the kernel's ephemeral range, so
#                    no client's port can collide with a server's)
#   SETTLE_S (15)    idle-memory: also reads RSS this many seconds after the connections are
#                    open (redis-server frees idle clients' query buffers in its cron; QUICK: 2)
set -euo pipefail

suite="${1:-}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
quick="${QUICK:-0}"
if [[ $quick == 1 ]]; then
    rounds="${ROUNDS:-1}"; duration="${DURATION_MS:-200}"; warmup="${WARMUP_MS:-100}"
else
    rounds="${ROUNDS:-5}"; duration="${DURATION_MS:-2000}"; warmup="${WARMUP_MS:-500}"
fi
server_cpu="${SERVER_CPU:-0}"
client_cpu="${CLIENT_CPU:-1}"
port_base="${PORT_BASE:-20000}"

build() {
    if [[ -z "${BIN_DIR:-}" ]]; then
        (cd "$repo" && cargo build --release -p corewire-bench --bins >&2 &&
            cargo build --release -p corewire --example echo_server >&2)
        BIN_DIR="$target/release"
    fi
    COREWIRE_ECHO="${COREWIRE_ECHO:-$target/release/examples/echo_server}"
    for exe in "$BIN_DIR/benchctl" "$COREWIRE_ECHO"; do
        [[ -x "$exe" ]] || { echo "run.sh: $exe missing" >&2; exit 1; }
    done
    BIN_DIR="$(realpath "$BIN_DIR")"
    COREWIRE_ECHO="$(realpath "$COREWIRE_ECHO")"
}

# Prints the command, then runs it.
run() {
    printf '+'
    printf ' %q' "$@"
    printf '\n'
    "$@"
}

percore() {
    build
    local common=(--var "corewire_echo=$COREWIRE_ECHO" --server-cpus "$server_cpu"
        --client-cpus "$client_cpu" --warmup-ms "$warmup" --port-base "$port_base")
    [[ -n "${SERVERS:-}" ]] && common+=(--servers "$SERVERS")
    [[ -n "${WORKLOAD:-}" ]] && common+=(--workload "$WORKLOAD")
    [[ -n "${JSON_OUT:-}" ]] && common+=(--json-out "$JSON_OUT")
    local def defs
    IFS=';' read -ra defs <<< "${EXTRA_SERVERS:-}"
    for def in "${defs[@]}"; do
        if [[ -n $def ]]; then common+=(--server "$def"); fi
    done
    echo "# Per-core echo: timing pass"
    run "$BIN_DIR/benchctl" percore "${common[@]}" --rounds "$rounds" --duration-ms "$duration"
    echo
    echo "# Per-core echo: io_uring enters and syscalls per request (perf stat pass, 1 round)"
    if ! command -v perf >/dev/null; then
        echo "perf not found: enters/req not measured (apt-get install linux-perf)"
        return
    fi
    run "$BIN_DIR/benchctl" percore "${common[@]}" --syscalls --rounds 1 \
        --duration-ms "$(( duration < 1000 ? duration : 1000 ))"
}

# The first port at or after $1 that no TCP socket uses in any state (listening, connected,
# TIME_WAIT): a server bound there cannot meet an old client's port.
free_port() {
    local p=$1
    while [[ -n "$(ss -Htan "sport = :$p")" ]]; do p=$(( p + 1 )); done
    echo "$p"
}

# Waits (up to 30 s) until something listens on 127.0.0.1:$1 (without connecting to it);
# gives up at once if the server process $2 has exited, showing its log $3.
wait_listen() {
    for _ in $(seq 1 1500); do
        [[ -n "$(ss -Hltn "sport = :$1")" ]] && return 0
        if ! kill -0 "$2" 2>/dev/null; then
            echo "run.sh: the server exited before listening on port $1; its log:" >&2
            cat "$3" >&2
            return 1
        fi
        sleep 0.02
    done
    echo "run.sh: nothing listens on port $1 after 30 s; the server's log:" >&2
    cat "$3" >&2
    return 1
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

idle_memory() {
    build
    local kv="${COREWIRE_KV:-}"
    if [[ -z "$kv" ]]; then
        (cd "$repo" && cargo build --release -p corewire-kv --bin corewire-kv >&2)
        kv="$target/release/corewire-kv"
    fi
    kv="$(realpath "$kv")"
    local n="${IDLE_CONNS:-$([[ $quick == 1 ]] && echo 300 || echo 10000)}"
    ulimit -n $(( n * 2 + 4096 )) 2>/dev/null || ulimit -n "$(ulimit -Hn)"
    local settle="${SETTLE_S:-$([[ $quick == 1 ]] && echo 2 || echo 15)}"
    local work; work="$(mktemp -d)"
    local port=$(( port_base - 1 ))
    echo "# Idle memory: $n idle connections (each after one exchange), server on CPU $server_cpu"
    echo
    echo "RSS is read 1 s after the last connection is open and again ${settle} s after it."
    echo
    echo "| server | RSS before KiB | RSS at 1 s KiB | per connection at 1 s (bytes) | RSS at ${settle} s KiB | per connection at ${settle} s (bytes) |"
    echo "| --- | --- | --- | --- | --- | --- |"
    local cmds=()
    for name in corewire-echo corewire-echo-epoll corewire-kv corewire-kv-epoll redis-server; do
        port="$(free_port $(( port + 1 )))"
        local cmd proto
        case "$name" in
            corewire-echo) cmd=("$COREWIRE_ECHO" --addr "127.0.0.1:$port" --shards 1); proto=echo ;;
            corewire-echo-epoll)
                cmd=(env COREWIRE_BACKEND=epoll "$COREWIRE_ECHO" --addr "127.0.0.1:$port" --shards 1)
                proto=echo ;;
            corewire-kv) cmd=("$kv" --shards 1 --port "$port"); proto=resp ;;
            corewire-kv-epoll)
                cmd=(env COREWIRE_BACKEND=epoll "$kv" --shards 1 --port "$port"); proto=resp ;;
            redis-server)
                command -v redis-server >/dev/null || { echo "| redis-server | not installed | | | | |"; continue; }
                mkdir -p "$work/redis"
                cmd=(redis-server --port "$port" --save "" --appendonly no --dir "$work/redis"
                    --maxclients $(( n + 100 )))
                proto=resp ;;
        esac
        cmds+=("taskset -c $server_cpu $(printf '%q ' "${cmd[@]}")"
            "taskset -c $client_cpu $repo/benches/idle_conns.py $port $n $proto")
        (cd "$work" && exec taskset -c "$server_cpu" "${cmd[@]}" >"$work/$name.log" 2>&1) &
        local spid=$!
        if ! wait_listen "$port" "$spid" "$work/$name.log"; then
            echo "| $name | failed: did not listen (log above) | | | | |"
            continue
        fi
        sleep 0.5
        local before after settled ready=""
        before="$(rss_kib "$spid")" || true
        coproc IDLE { exec taskset -c "$client_cpu" python3 "$repo/benches/idle_conns.py" "$port" "$n" "$proto"; }
        read -r ready <&"${IDLE[0]}" || true
        sleep 1
        after="$(rss_kib "$spid")" || true
        sleep $(( settle > 1 ? settle - 1 : 0 ))
        settled="$(rss_kib "$spid")" || true
        exec {IDLE[1]}>&-
        wait "$IDLE_PID" 2>/dev/null || true
        kill -TERM "$spid" 2>/dev/null; wait "$spid" 2>/dev/null || true
        if [[ -z "$before" || -z "$after" || -z "$settled" ]]; then
            echo "run.sh: $name exited during the measurement; its log:" >&2
            cat "$work/$name.log" >&2
            echo "| $name | failed: the server exited (log above) | | | | |"
            continue
        fi
        if [[ "$ready" != "ready $n" ]]; then
            echo "| $name | $before | failed: ${ready:-client gave up} | | | |"
            continue
        fi
        echo "| $name | $before | $after | $(( (after - before) * 1024 / n )) | $settled | $(( (settled - before) * 1024 / n )) |"
    done
    echo
    echo "Commands:"
    printf '    %s\n' "${cmds[@]}"
    rm -rf "$work"
}

pinned_common() {
    common=(--var "corewire_echo=$COREWIRE_ECHO" --server-cpus "$server_cpu"
        --client-cpus "$client_cpu" --warmup-ms "$warmup" --rounds "$rounds"
        --duration-ms "$duration" --port-base "$port_base")
    [[ -n "${WORKLOAD:-}" ]] && common+=(--workload "$WORKLOAD")
    [[ -n "${JSON_OUT:-}" ]] && common+=(--json-out "$JSON_OUT")
    return 0
}

rpc() {
    build
    local common; pinned_common
    echo "# RPC per core: corewire RPC vs raw echo vs tonic (one shard / worker)"
    run "$BIN_DIR/benchctl" rpc "${common[@]}" --shards 1 --workers 1 --baseline corewire-raw \
        ${SERVERS:+--servers "$SERVERS"}
}

fairness() {
    build
    local common; pinned_common
    echo "# Fairness: 8 hot conns x depth 256 + probe (own listener), handler cost, budgets"
    # shellcheck disable=SC2086 # FAIRNESS_ARGS is split into flags on purpose
    run "$BIN_DIR/benchctl" fairness "${common[@]}" --hot-conns 8 --hot-depth 256 \
        --hash-rounds "${HASH_ROUNDS:-32}" --budgets "${BUDGETS:-unlimited,256,64,32,16,4}" \
        --servers "${SERVERS:-corewire-rpc}" ${FAIRNESS_ARGS:-}
}

rdma_fairness() {
    (cd "$repo" && cargo build --release --example rdma_fairness >&2)
    local env=(ROUNDS="${ROUNDS:-3}" RDMA_FAIRNESS="$target/release/examples/rdma_fairness")
    [[ $quick == 1 ]] && env=(ROUNDS=1 DUR_MS=1000 WARMUP_MS=200 "${env[1]}")
    (cd "$repo" && run env "${env[@]}" cargo xtask vm -- vm/bench/rdma-fairness.sh)
}

# CPU time (ns) of every thread of process $1 so far.
cpu_ns() {
    local total=0 t
    for t in /proc/"$1"/task/*/schedstat; do
        total=$(( total + $(cut -d' ' -f1 "$t") ))
    done
    echo "$total"
}

# A gRPC request body for h2load: one uncompressed message, an EchoMessage of $1 payload bytes.
grpc_body() {
    python3 - "$1" "$2" <<'PY'
import sys
size, path = int(sys.argv[1]), sys.argv[2]
def varint(n):
    out = b""
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])
msg = b"\x0a" + varint(size) + bytes(i % 251 for i in range(size))
open(path, "wb").write(b"\x00" + len(msg).to_bytes(4, "big") + msg)
PY
}

# h2load against one gRPC server: $1 label, then the server's command (it gets --addr).
# One h2load measurement per message size against a fresh server: appends
# "label size req/s srv-µs/req failed" lines to the file $H2_ROWS.
h2load_one() {
    local label=$1; shift
    local port; port=$(free_port "$port_base")
    local log; log="$(mktemp)"
    taskset -c "$server_cpu" "$@" --addr "127.0.0.1:$port" >"$log" 2>&1 &
    local pid=$!
    wait_listen "$port" "$pid" "$log" || { kill "$pid" 2>/dev/null; return 1; }
    local url="http://127.0.0.1:$port/corewire.bench.Echo/Echo"
    local size body out before after
    for size in 64 4096; do
        body="$(mktemp)"
        grpc_body "$size" "$body"
        local h2=(h2load -c 64 -m 4 -d "$body" -H 'content-type: application/grpc'
            -H 'te: trailers' "$url")
        # Warm-up, then the measured run with the server's CPU time around it.
        taskset -c "$client_cpu" "${h2[@]}" -D "${warmup}ms" >/dev/null 2>&1 || true
        before=$(cpu_ns "$pid")
        out="$(taskset -c "$client_cpu" "${h2[@]}" -D "${duration}ms" 2>&1)"
        after=$(cpu_ns "$pid")
        rm -f "$body"
        local rps ok failed
        rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
        ok=$(sed -n 's/^requests: .* \([0-9]*\) succeeded, \([0-9]*\) failed.*/\1/p' <<<"$out")
        failed=$(sed -n 's/^requests: .* succeeded, \([0-9]*\) failed.*/\1/p' <<<"$out")
        if [[ -z "$rps" || -z "$ok" || "$ok" == 0 ]]; then
            echo "run.sh: h2load against $label failed:" >&2
            echo "$out" >&2
            kill "$pid"; return 1
        fi
        echo "$label $size $rps $(awk -v d=$(( after - before )) -v n="$ok" 'BEGIN { print d / n / 1000 }') $failed" >>"$H2_ROWS"
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -f "$log"
}

# h2load against both servers, `rounds` interleaved rounds (a fresh server each), then the
# medians per server and size and corewire's ratios to tonic.
h2load_rounds() {
    H2_ROWS="$(mktemp)"
    local r
    for ((r = 1; r <= rounds; r++)); do
        h2load_one corewire-grpc "$BIN_DIR/rpc_corewire" server --grpc --shards 1 --no-pin || return 1
        h2load_one tonic "$BIN_DIR/rpc_tonic" server --workers 1 || return 1
    done
    echo "| round | server         |    size |      req/s | srv µs/req | failed |"
    echo "|-------|----------------|---------|------------|------------|--------|"
    awk -v n=2 '{ printf "| %5d | %-14s | %6s B | %10.0f | %10.2f | %6s |\n", int((NR - 1) / (2 * n)) + 1, $1, $2, $3, $4, $5 }' "$H2_ROWS"
    echo
    echo "Medians of $rounds rounds:"
    echo "| size | corewire-grpc req/s | tonic req/s | QPS ratio | corewire srv µs/req | tonic srv µs/req | CPU/req ratio |"
    echo "|------|---------------------|-------------|-----------|---------------------|------------------|---------------|"
    local size
    for size in 64 4096; do
        awk -v size="$size" '
            function median(a, n,   i, j, t) {
                for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
                return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            }
            $2 == size && $1 == "corewire-grpc" { cq[++nc] = $3; cc[nc] = $4 }
            $2 == size && $1 == "tonic" { tq[++nt] = $3; tc[nt] = $4 }
            END {
                q1 = median(cq, nc); c1 = median(cc, nc); q2 = median(tq, nt); c2 = median(tc, nt)
                printf "| %4s B | %19.0f | %11.0f | %8.2fx | %19.2f | %16.2f | %12.2fx |\n", size, q1, q2, q1 / q2, c1, c2, c1 / c2
            }' "$H2_ROWS"
    done
    rm -f "$H2_ROWS"
}

grpc() {
    # Only the bench binaries: this suite does not run the raw echo example.
    if [[ -z "${BIN_DIR:-}" ]]; then
        (cd "$repo" && cargo build --release -p corewire-bench --bins >&2)
        BIN_DIR="$target/release"
    fi
    BIN_DIR="$(realpath "$BIN_DIR")"
    COREWIRE_ECHO="${COREWIRE_ECHO:-unused}"
    local common; pinned_common
    [[ -z "${WORKLOAD:-}" ]] && common+=(--workload "64 conn")
    echo "# gRPC per core: corewire's gRPC server vs tonic's, same proto and handler, tonic's client as the load"
    run "$BIN_DIR/benchctl" rpc "${common[@]}" --shards 1 --workers 1 \
        --servers "${SERVERS:-corewire-grpc,tonic}" --baseline tonic
    echo
    echo "# gRPC per core, load from h2load (64 conns x 4 streams; server on CPU $server_cpu, h2load on CPU $client_cpu)"
    command -v h2load >/dev/null || { echo "h2load not found: apt-get install nghttp2-client (cargo xtask setup)"; return 1; }
    h2load_rounds
    echo
    echo "# Typed calls vs the raw Service (corewire's framing over TCP, one shard)"
    run "$BIN_DIR/benchctl" rpc "${common[@]}" --shards 1 \
        --servers corewire-typed,corewire-rpc --baseline corewire-rpc
}

kv_fairness() {
    local args=(--rounds "$rounds")
    [[ $quick == 1 ]] && args=(--quick)
    # shellcheck disable=SC2086 # KV_FAIRNESS_ARGS is split into flags on purpose
    run "$repo/examples/kv/bench/fairness.sh" "${args[@]}" ${KV_FAIRNESS_ARGS:-}
}

kv_memory() {
    local args=()
    [[ $quick == 1 ]] && args=(--quick)
    # shellcheck disable=SC2086 # KV_MEMORY_ARGS is split into flags on purpose
    run "$repo/examples/kv/bench/memory.sh" "${args[@]}" ${KV_MEMORY_ARGS:-}
}

tls_suite() {
    local args=(--rounds "$rounds") secs=5
    [[ $quick == 1 ]] && args=(--quick) && secs=1
    # shellcheck disable=SC2086 # TLS_ARGS is split into flags on purpose
    run "$repo/examples/kv/bench/tls.sh" "${args[@]}" ${TLS_ARGS:-}
    (cd "$repo" && cargo build --release --example tls_bench >&2)
    echo "# TLS echo and RPC per core vs plaintext"
    # shellcheck disable=SC2086 # TLS_BENCH_ARGS is split into flags on purpose
    run "$target/release/examples/tls_bench" --seconds "$secs" --server-cpu "$server_cpu" \
        --client-cpu "$client_cpu" ${TLS_BENCH_ARGS:-}
}

# shellcheck source=suites/scaling.sh
source "$repo/benches/suites/scaling.sh"
# shellcheck source=suites/openloop.sh
source "$repo/benches/suites/openloop.sh"

case "$suite" in
    percore) percore ;;
    scaling) scaling ;;
    openloop) openloop ;;
    tls) tls_suite ;;
    acl) run "$repo/examples/kv/bench/acl.sh" --rounds "$rounds" $([[ $quick == 1 ]] && echo --quick) ;;
    rpc) rpc ;;
    grpc) grpc ;;
    fairness) fairness ;;
    kv-fairness) kv_fairness ;;
    kv-memory) kv_memory ;;
    rdma-fairness) rdma_fairness ;;
    idle-memory) idle_memory ;;
    -h|--help|"") sed -n '2,103p' "$0"; [[ -n "$suite" ]] ;;
    *) echo "run.sh: unknown suite $suite (percore, scaling, openloop, idle-memory, rpc, grpc, fairness, kv-fairness, kv-memory, rdma-fairness, tls, acl)" >&2; exit 2 ;;
esac
