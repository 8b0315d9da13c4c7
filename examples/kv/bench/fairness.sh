#!/usr/bin/env bash
# KV fairness: corewire-kv with 1 shard on SERVER_CPU (0); on CLIENT_CPU (1)
# HOT_CONNS (8) hot connections pipelining large batches (half MSET, half MGET of BATCH keys
# each, PIPELINE deep, redis-benchmark) and one probe connection sending GET at depth 1
# (redis-benchmark -c 1 -P 1). One server per (round, budget), budgets interleaved within a
# round. Per run: the probe's p50/p99/max latency (redis-benchmark's own figures, ms), hot
# commands/s and keys/s over the probe's run (INFO total_commands_processed; the probe's own
# GETs excluded), server CPU % and the hot clients' CPU % of one CPU over that window (the
# clients must stay well below 100 each, else they, not the budget, set the figures). Medians
# of ROUNDS; ratios to budget=unlimited.
#
# Usage: examples/kv/bench/fairness.sh [--rounds R (5)] [--budgets LIST (unlimited,default)]
#            [--batch K (100)] [--value-size B (64)] [--pipeline P (16)] [--hot-conns N (8)]
#            [--probe-requests N (20000)] [--keyspace K (100000)] [--quick] [--no-build]
#   budgets: `unlimited`, `default` (corewire-kv without --budget) or a number of requests
#   --quick = --rounds 1 --probe-requests 300 --batch 20 (smoke run, no figures)
# Environment: SERVER_CPU (0), CLIENT_CPU (1), COREWIRE_KV (path; default: build, release).
set -euo pipefail

rounds=5
budgets=unlimited,default
batch=100
value_size=64
pipeline=16
hot_conns=8
probe_requests=20000
keyspace=100000
build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --budgets) budgets="$2"; shift 2 ;;
        --batch) batch="$2"; shift 2 ;;
        --value-size) value_size="$2"; shift 2 ;;
        --pipeline) pipeline="$2"; shift 2 ;;
        --hot-conns) hot_conns="$2"; shift 2 ;;
        --probe-requests) probe_requests="$2"; shift 2 ;;
        --keyspace) keyspace="$2"; shift 2 ;;
        --quick) rounds=1; probe_requests=300; batch=20; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "fairness.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
IFS=, read -r -a budget_list <<<"$budgets"
server_cpu="${SERVER_CPU:-0}"
client_cpu="${CLIENT_CPU:-1}"
(( hot_conns >= 2 )) || { echo "fairness.sh: --hot-conns must be at least 2 (MSET and MGET)" >&2; exit 2; }

for tool in redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "fairness.sh: $tool not found (apt-get install redis-tools)" >&2; exit 1; }
done
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=kv-binary.sh
source "$here/kv-binary.sh"
[[ -x "$kv" ]] || { echo "fairness.sh: $kv missing" >&2; exit 1; }

work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
tck="$(getconf CLK_TCK)"
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ns() { date +%s%N; }
processed() { redis-cli -p "$1" info stats | tr -d '\r' | awk -F: '$1 == "total_commands_processed" { print $2 }'; }

value="$(head -c "$value_size" /dev/zero | tr '\0' v)"
mset_args=() mget_args=()
for _ in $(seq 1 "$batch"); do
    mset_args+=("key:__rand_int__" "$value")
    mget_args+=("key:__rand_int__")
done
mset_conns=$(( hot_conns / 2 ))
mget_conns=$(( hot_conns - mset_conns ))
# corewire-kv's command line for budget $1 on port $2.
kv_cmd() {
    local flag=()
    [[ $1 != default ]] && flag=(--budget "$1")
    echo "$kv --shards 1 --port $2 ${flag[*]}"
}

# One run: "probe_p50_ms probe_p99_ms probe_max_ms hot_cmds_per_s hot_keys_per_s srv_cpu_pct cli_cpu_pct".
run_once() {
    local budget="$1" port cmd
    port="$(free_port)"
    read -r -a cmd <<<"$(kv_cmd "$budget" "$port")"
    taskset -c "$server_cpu" "${cmd[@]}" >"$work/server.log" 2>&1 &
    local spid=$!
    pids+=("$spid")
    local up=0
    for _ in $(seq 1 100); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && { up=1; break; }
        sleep 0.1
    done
    [[ $up == 1 ]] || { echo "fairness.sh: corewire-kv did not come up: $(tail -3 "$work/server.log")" >&2; exit 1; }
    redis-cli -p "$port" set probe:key probe >/dev/null
    # The hot clients run until stopped: far more requests than the window needs.
    taskset -c "$client_cpu" redis-benchmark -p "$port" -c "$mset_conns" -P "$pipeline" \
        -n 2000000000 -r "$keyspace" MSET "${mset_args[@]}" >/dev/null 2>&1 &
    local h1=$!
    taskset -c "$client_cpu" redis-benchmark -p "$port" -c "$mget_conns" -P "$pipeline" \
        -n 2000000000 -r "$keyspace" MGET "${mget_args[@]}" >/dev/null 2>&1 &
    local h2=$!
    pids+=("$h1" "$h2")
    sleep 0.5 # warm-up: every hot connection is open and pipelining
    local c0 s0 h0 t0 csv c1 s1 hc1 t1
    c0="$(processed "$port")"; s0="$(cpu_ticks "$spid")"
    h0=$(( $(cpu_ticks "$h1") + $(cpu_ticks "$h2") )); t0="$(now_ns)"
    csv="$(taskset -c "$client_cpu" redis-benchmark -p "$port" -c 1 -P 1 -n "$probe_requests" \
        --csv GET probe:key 2>/dev/null | tail -n 1)"
    t1="$(now_ns)"; c1="$(processed "$port")"; s1="$(cpu_ticks "$spid")"
    hc1=$(( $(cpu_ticks "$h1") + $(cpu_ticks "$h2") ))
    kill "$h1" "$h2" 2>/dev/null || true
    wait "$h1" "$h2" 2>/dev/null || true
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    pids=()
    # CSV: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    echo "$csv" | awk -F'"' -v c0="$c0" -v c1="$c1" -v s="$(( s1 - s0 ))" -v h="$(( hc1 - h0 ))" \
        -v t="$(( t1 - t0 ))" -v tk="$tck" -v probe="$probe_requests" -v k="$batch" '{
            secs = t / 1e9
            hot = (c1 - c0 - probe - 1) / secs
            printf "%s %s %s %.0f %.0f %.0f %.0f\n", $10, $14, $16, hot, hot * k,
                s / tk / secs * 100, h / tk / secs * 100
        }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v c="$1" '{ print $c }' "$2" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2f×", a / b; else print "n/a" }'; }

for round in $(seq 1 "$rounds"); do
    for b in "${budget_list[@]}"; do
        line="$(run_once "$b")"
        echo "$line" >>"$work/runs.$b"
        echo "  round $round budget=$b: $line" >&2
    done
done

base="${budget_list[0]}"
echo "## KV fairness: corewire-kv (1 shard), $hot_conns hot connections ($mset_conns MSET + $mget_conns MGET of $batch keys, -P $pipeline) + 1 probe GET at depth 1"
echo
echo "Server on CPU $server_cpu, every client on CPU $client_cpu; $(nproc) CPUs online; $value_size-byte values, -r $keyspace."
echo "Medians of $rounds interleaved rounds; the window is the probe's $probe_requests GETs. Ratios to budget=$base."
echo
echo "| budget | probe p50 ms | probe p99 ms | probe max ms | hot cmds/s | hot keys/s | srv CPU % | hot clients CPU % | probe p99 vs $base | hot cmds/s vs $base |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for b in "${budget_list[@]}"; do
    f="$work/runs.$b"
    printf "| %s | %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %s | %s |\n" "$b" \
        "$(col 1 "$f")" "$(col 2 "$f")" "$(col 3 "$f")" "$(col 4 "$f")" "$(col 5 "$f")" \
        "$(col 6 "$f")" "$(col 7 "$f")" \
        "$(ratio "$(col 2 "$f")" "$(col 2 "$work/runs.$base")")" \
        "$(ratio "$(col 4 "$f")" "$(col 4 "$work/runs.$base")")"
done
echo
echo "Commands (ports vary per run; MSET/MGET arguments abbreviated):"
echo
for b in "${budget_list[@]}"; do
    echo "    taskset -c $server_cpu $(kv_cmd "$b" PORT)"
done
echo "    taskset -c $client_cpu redis-benchmark -p PORT -c $mset_conns -P $pipeline -n 2000000000 -r $keyspace MSET key:__rand_int__ $value_size-byte-value ... ($batch pairs)"
echo "    taskset -c $client_cpu redis-benchmark -p PORT -c $mget_conns -P $pipeline -n 2000000000 -r $keyspace MGET key:__rand_int__ ... ($batch keys)"
echo "    taskset -c $client_cpu redis-benchmark -p PORT -c 1 -P 1 -n $probe_requests --csv GET probe:key"
