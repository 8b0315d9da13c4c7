#!/usr/bin/env bash
# Per-core KV benchmark: corewire-kv with 1 shard and redis-server, each alone on
# SERVER_CPU (0), redis-benchmark on CLIENT_CPU (1); the full default redis-benchmark test list
# at -P 1 and -P 16, one test per run so each command gets its own server CPU figure.
# Reports medians of ROUNDS interleaved rounds (tests × pipelines × servers inside each round):
# requests/s, p50 latency, server CPU seconds per million requests (utime+stime from
# /proc/PID/stat around the run, in 10 ms ticks: -P 16 runs get --requests-p16, 10^6 by default,
# so a run lasts long enough for the ticks to resolve CPU per request). Commands corewire does not support (probed with redis-cli
# before the run) are reported as such and not benchmarked. Then memory per key / element per
# type: VmRSS delta after loading N keys (strings) or N elements into one key (hash, list, set,
# zset), divided by N.
#
# Usage: examples/kv/bench/percore.sh [--requests N (100000, at -P 1)]
#            [--requests-p16 N (1000000, at -P 16)] [--rounds R (5)] [--clients C (50)]
#            [--keyspace K (100000)] [--mem-items N (100000)] [--tests a,b,c] [--quick] [--no-build]
#            [--memory-only] [--mem-types string,hash,list,set,zset,stream,bitmap,hll,geo] [--mem-rounds R (1)]
#            [--mem-warmup]
#   --tests = a comma list of redis-benchmark test names (default: the full default list),
#             plus our own (xadd is one: redis-benchmark 7.0's -t list has no XADD test and
#             prints nothing for it): xadd (XADD * of one field to one stream), evalsha (EVALSHA of a script of 3 commands on one key),
#             zunionstore (ZUNIONSTORE of two 100-member sorted sets), xread (XREAD COUNT 10
#             of a 100-entry stream), setbit (SETBIT of one bit of a random key), pfadd
#             (PFADD of a random element), geoadd (GEOADD of a random member)
#   --quick = --requests 2000 --requests-p16 4000 --rounds 1 --mem-items 2000 and three tests
#             (smoke run)
#   --memory-only = skip the throughput runs, only measure memory per item
#   --mem-types = a comma list of the types to measure memory for (default: all nine)
#   --mem-rounds = loads per type and server; the median is reported
#   --mem-warmup = pipe as many PINGs as items into each fresh server before the first RSS
#             sample, so buffers a pipelined burst touches (receive buffers, allocator
#             pages committed for them) are not counted per item
# Environment: SERVER_CPU (0), CLIENT_CPU (1), COREWIRE_KV (path; default: build, release),
# COREWIRE_KV_ARGS (extra corewire-kv flags, e.g. "--idle-spin-us 50").
set -euo pipefail
# Commands are split into words unquoted below; `XADD key * ...` must not glob.
set -f

requests=100000
requests_p16=1000000
rounds=5
clients=50
keyspace=100000
mem_items=100000
mem_rounds=1
mem_warmup=0
mem_settle=0.3
build=1
memory_only=0
mem_types=(string hash list set zset stream bitmap hll geo)
tests=(ping_inline ping_mbulk set get incr lpush rpush lpop rpop sadd hset spop zadd zpopmin
    lrange_100 lrange_300 lrange_500 lrange_600 mset xadd evalsha zunionstore xread setbit pfadd
    geoadd)
while [[ $# -gt 0 ]]; do
    case "$1" in
        --requests) requests="$2"; shift 2 ;;
        --requests-p16) requests_p16="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --keyspace) keyspace="$2"; shift 2 ;;
        --mem-items) mem_items="$2"; shift 2 ;;
        --mem-rounds) mem_rounds="$2"; shift 2 ;;
        --mem-settle) mem_settle="$2"; shift 2 ;;
        --mem-warmup) mem_warmup=1; shift ;;
        --tests) IFS=, read -r -a tests <<<"$2"; shift 2 ;;
        --quick) requests=2000; requests_p16=4000; rounds=1; mem_items=2000
            tests=(ping_mbulk set get); shift ;;
        --no-build) build=0; shift ;;
        --memory-only) memory_only=1; shift ;;
        --mem-types) IFS=, read -r -a mem_types <<<"$2"; shift 2 ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *) echo "percore.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
server_cpu="${SERVER_CPU:-0}"
client_cpu="${CLIENT_CPU:-1}"

for tool in redis-benchmark redis-server redis-cli; do
    command -v "$tool" >/dev/null || { echo "percore.sh: $tool not found (apt-get install redis-tools redis-server)" >&2; exit 1; }
done
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=kv-binary.sh
source "$here/kv-binary.sh"
[[ -x "$kv" ]] || { echo "percore.sh: $kv missing" >&2; exit 1; }

work="$(mktemp -d)"
declare -A pid port cmdline
cleanup() {
    for name in "${!pid[@]}"; do kill "${pid[$name]}" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
tck="$(getconf CLK_TCK)"
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() {
    local name="$1"
    port[$name]="$(free_port)"
    local cmd
    if [[ $name == corewire ]]; then
        # shellcheck disable=SC2206 # COREWIRE_KV_ARGS is split into flags on purpose
        cmd=("$kv" --shards 1 --port "${port[$name]}" ${COREWIRE_KV_ARGS:-})
    else
        mkdir -p "$work/redis"
        cmd=(redis-server --port "${port[$name]}" --save "" --appendonly no --dir "$work/redis")
    fi
    cmdline[$name]="taskset -c $server_cpu $(printf '%q ' "${cmd[@]}")"
    taskset -c "$server_cpu" "${cmd[@]}" >"$work/$name.log" 2>&1 &
    pid[$name]=$!
    for _ in $(seq 1 100); do
        redis-cli -p "${port[$name]}" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "percore.sh: $name did not come up: $(tail -3 "$work/$name.log")" >&2
    exit 1
}
stop() { kill "${pid[$1]}" 2>/dev/null || true; wait "${pid[$1]}" 2>/dev/null || true; unset "pid[$1]"; }

# The command each test sends, to probe support.
probe_cmd() {
    case "$1" in
        ping_inline|ping_mbulk) echo "PING" ;;
        set) echo "SET probe:k v" ;; get) echo "GET probe:k" ;; incr) echo "INCR probe:n" ;;
        lpush) echo "LPUSH probe:l a" ;; rpush) echo "RPUSH probe:l a" ;;
        lpop) echo "LPOP probe:l" ;; rpop) echo "RPOP probe:l" ;;
        sadd) echo "SADD probe:s a" ;; hset) echo "HSET probe:h f v" ;; spop) echo "SPOP probe:s" ;;
        zadd) echo "ZADD probe:z 1 a" ;; zpopmin) echo "ZPOPMIN probe:z" ;;
        lrange_*) echo "LRANGE probe:l 0 99" ;;
        mset) echo "MSET probe:a 1 probe:b 2" ;; xadd) echo "XADD probe:x * f v" ;;
        evalsha) echo "EVAL return 1 0" ;; zunionstore) echo "ZUNIONSTORE probe:zu 1 probe:z" ;;
        xread) echo "XREAD COUNT 1 STREAMS probe:x 0" ;; setbit) echo "SETBIT probe:b 7 1" ;;
        pfadd) echo "PFADD probe:p a" ;; geoadd) echo "GEOADD probe:g 13.36 38.11 a" ;;
    esac
}

# Tests that are not redis-benchmark's: the command it sends (after setup_custom).
eval_script="redis.call('incr', KEYS[1]) redis.call('incr', KEYS[1]) return redis.call('get', KEYS[1])"
custom_cmd() {
    case "$1" in
        evalsha) echo "EVALSHA $(redis-cli -p "$2" script load "$eval_script") 1 bench:eval:__rand_int__" ;;
        zunionstore) echo "ZUNIONSTORE bench:zu 2 bench:z1 bench:z2" ;;
        xadd) echo "XADD bench:xs * field value" ;;
        xread) echo "XREAD COUNT 10 STREAMS bench:x 0" ;;
        # Random keys: redis-benchmark's __rand_int__ is zero-padded, which no server takes
        # as a bit offset.
        setbit) echo "SETBIT bench:bits:__rand_int__ 7 1" ;;
        pfadd) echo "PFADD bench:hll e:__rand_int__" ;;
        geoadd) echo "GEOADD bench:geo 13.361389 38.115556 m:__rand_int__" ;;
    esac
}
# Data the custom tests read: two 100-member sorted sets (half their members shared) and a
# 100-entry stream.
setup_custom() {
    local p="$1" i
    for i in $(seq 1 100); do
        echo "ZADD bench:z1 $i m$i"
        echo "ZADD bench:z2 $((i * 2)) m$((i + 50))"
        echo "XADD bench:x * field value$i"
    done | redis-cli -p "$p" >/dev/null
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# The throughput part; --memory-only skips to the memory part below.
if [[ $memory_only == 0 ]]; then
start redis; start corewire
declare -A supported
for t in "${tests[@]}"; do
    # shellcheck disable=SC2046 # the probe command is split into words on purpose
    if redis-cli -p "${port[corewire]}" $(probe_cmd "$t") 2>&1 | grep -q '^ERR\|^(error)'; then
        supported[$t]=0
    else
        supported[$t]=1
    fi
done
redis-cli -p "${port[corewire]}" flushall >/dev/null 2>&1 || true
for name in redis corewire; do setup_custom "${port[$name]}"; done

# Requests per run at pipeline depth $1.
requests_at() { if [[ $1 == 1 ]]; then echo "$requests"; else echo "$requests_p16"; fi; }

# One run: "rps p50_ms cpu_s_per_Mreq".
bench_once() {
    local name="$1" t="$2" p="$3" before after csv n
    n="$(requests_at "$p")"
    local custom
    custom="$(custom_cmd "$t" "${port[$name]}")"
    before="$(cpu_ticks "${pid[$name]}")"
    if [[ -n $custom ]]; then
        # shellcheck disable=SC2086 # the command is split into words on purpose
        csv="$(taskset -c "$client_cpu" redis-benchmark -p "${port[$name]}" -n "$n" \
            -r "$keyspace" -c "$clients" -P "$p" --csv $custom 2>/dev/null | tail -n 1)"
    else
        csv="$(taskset -c "$client_cpu" redis-benchmark -p "${port[$name]}" -t "$t" -n "$n" \
            -r "$keyspace" -c "$clients" -P "$p" --csv 2>/dev/null | tail -n 1)"
    fi
    after="$(cpu_ticks "${pid[$name]}")"
    echo "$csv" | awk -F'"' -v b="$before" -v a="$after" -v tk="$tck" -v n="$n" \
        '{ printf "%s %s %.3f\n", $4, $10, (a - b) / tk / (n / 1e6) }'
}

pipelines=(1 16)
for round in $(seq 1 "$rounds"); do
    for p in "${pipelines[@]}"; do
        for t in "${tests[@]}"; do
            for name in redis corewire; do
                [[ $name == corewire && ${supported[$t]} == 0 ]] && continue
                line="$(bench_once "$name" "$t" "$p")"
                echo "$line" >>"$work/runs.$name.$t.$p"
                echo "  round $round $name ${t^^} -P $p: $line" >&2
            done
        done
    done
done

col() { awk -v c="$1" '{ print $c }' "$2" | median; }

echo "## Per-core KV: corewire-kv (1 shard) vs redis-server $(redis-server --version | awk '{print $3}' | sed 's/v=//')"
echo
echo "Servers on CPU $server_cpu (taskset), redis-benchmark on CPU $client_cpu; $(nproc) CPUs online."
echo "Medians of $rounds interleaved rounds; requests per run: $requests at -P 1, $requests_p16 at -P 16;"
echo "$clients clients, -r $keyspace, 3-byte values."
echo "CPU = server utime+stime per million requests (s/Mreq; 10 ms ticks over each run)."
echo
echo "| test | -P | redis rps | corewire rps | ratio | redis p50 ms | corewire p50 ms | redis CPU s/Mreq | corewire CPU s/Mreq | CPU ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for p in "${pipelines[@]}"; do
    for t in "${tests[@]}"; do
        r="$work/runs.redis.$t.$p"; c="$work/runs.corewire.$t.$p"
        if [[ ${supported[$t]} == 0 ]]; then
            # redis-benchmark 7.0 has no XADD test (it prints nothing): text, not a number.
            printf "| %s | %s | %s | not supported | | %s | | %s | | |\n" "${t^^}" "$p" \
                "$(col 1 "$r")" "$(col 2 "$r")" "$(col 3 "$r")"
            continue
        fi
        printf "| %s | %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s |\n" "${t^^}" "$p" \
            "$(col 1 "$r")" "$(col 1 "$c")" "$(ratio "$(col 1 "$c")" "$(col 1 "$r")")" \
            "$(col 2 "$r")" "$(col 2 "$c")" "$(col 3 "$r")" "$(col 3 "$c")" \
            "$(ratio "$(col 3 "$c")" "$(col 3 "$r")")"
    done
done
stop redis; stop corewire
fi

# Memory per key (strings) and per element (one big hash, list, set, zset), both servers fresh.
gen() {
    python3 - "$1" "$2" <<'PY'
import sys
kind, n = sys.argv[1], int(sys.argv[2])
def resp(*a):
    return "*%d\r\n" % len(a) + "".join("$%d\r\n%s\r\n" % (len(x), x) for x in a)
out = []
for i in range(n):
    if kind == "string": out.append(resp("SET", "key:%d" % i, "val%06d" % i))
    elif kind == "hash": out.append(resp("HSET", "h", "field:%d" % i, "val%06d" % i))
    elif kind == "list": out.append(resp("RPUSH", "l", "val%06d" % i))
    elif kind == "set": out.append(resp("SADD", "s", "member:%d" % i))
    elif kind == "zset": out.append(resp("ZADD", "z", str(i), "member:%d" % i))
    elif kind == "stream": out.append(resp("XADD", "x", "*", "field", "val%06d" % i))
    # 64 bytes of bitmap per item: the figure is per bit (items x 512, below).
    elif kind == "bitmap": out.append(resp("SETBIT", "bm", str(i * 512 + 511), "1"))
    elif kind == "hll": out.append(resp("PFADD", "hll:%d" % i, "e%d" % i))
    elif kind == "geo":
        lon = -180 + (i * 7919 % 3600000) / 10000.0
        lat = -85 + (i * 104729 % 1700000) / 10000.0
        out.append(resp("GEOADD", "geo", "%.6f" % lon, "%.6f" % lat, "member:%d" % i))
    elif kind == "ping": out.append(resp("PING"))
sys.stdout.write("".join(out))
PY
}
echo
warm_note=""
[[ $mem_warmup == 1 ]] && warm_note=", after $mem_items PINGs"
echo "### Memory per key / element ($mem_items items, VmRSS delta / items, median of $mem_rounds loads$warm_note)"
echo
echo "| type | redis RSS B/item | corewire RSS B/item | ratio | redis used_memory B/item | corewire used_memory B/item | ratio |"
echo "|---|---|---|---|---|---|---|"
# One load into a fresh server: "RSS-bytes heap-bytes" per item, or why not. The heap figure
# is `INFO memory`'s used_memory delta (each server's own allocation count), steadier than
# RSS where the per-item figure is small against the pages a pipelined burst touches.
used_memory() { redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'; }
per_item() {
    awk -v a="$1" -v b="$2" -v n="$3" \
        'BEGIN { v = (a - b) / n; if (v < 10 && v > -10) printf "%.2f", v; else printf "%d", v }'
}
mem_once() {
    local name="$1" kind="$2" before used_before
    start "$name"
    if [[ $mem_warmup == 1 ]]; then
        gen ping "$mem_items" | redis-cli -p "${port[$name]}" --pipe >/dev/null 2>&1
    fi
    sleep "$mem_settle"
    before="$(rss_kib "${pid[$name]}")"
    used_before="$(used_memory "${port[$name]}")"
    if gen "$kind" "$mem_items" | redis-cli -p "${port[$name]}" --pipe >"$work/pipe.log" 2>&1 &&
        grep -q 'errors: 0' "$work/pipe.log"; then
        sleep "$mem_settle"
        # A bitmap item is 64 bytes of the bitmap (its last bit set): the figure is per bit.
        local n="$mem_items"
        [[ $kind == bitmap ]] && n=$((mem_items * 512))
        echo "$(per_item "$(( $(rss_kib "${pid[$name]}") * 1024 ))" "$((before * 1024))" "$n")" \
            "$(per_item "$(used_memory "${port[$name]}")" "$used_before" "$n")"
    elif grep -q 'unknown command' "$work/pipe.log"; then
        echo "not supported"
    else
        echo "failed ($(grep -m1 -i 'err' "$work/pipe.log" | head -c 80))"
    fi
    stop "$name"
}
for kind in "${mem_types[@]}"; do
    declare -A rss heap
    for name in redis corewire; do
        # The median of --mem-rounds loads: RSS after a load varies run to run (freed
        # buffers the allocator keeps or returns).
        : >"$work/mem.$name"
        for _ in $(seq 1 "$mem_rounds"); do mem_once "$name" "$kind" >>"$work/mem.$name"; done
        if grep -q '^-\?[0-9.]* -\?[0-9.]*$' "$work/mem.$name"; then
            rss[$name]="$(cut -d' ' -f1 "$work/mem.$name" | median)"
            heap[$name]="$(cut -d' ' -f2 "$work/mem.$name" | median)"
        else
            rss[$name]="$(grep -v '^-\?[0-9.]* -\?[0-9.]*$' "$work/mem.$name" | head -n 1)"
            heap[$name]="-"
        fi
    done
    echo "| $kind | ${rss[redis]} | ${rss[corewire]} | $(ratio "${rss[corewire]}" "${rss[redis]}") | ${heap[redis]} | ${heap[corewire]} | $(ratio "${heap[corewire]}" "${heap[redis]}") |"
done
echo
echo "Commands (ports vary per run):"
echo
echo "    ${cmdline[redis]}"
echo "    ${cmdline[corewire]}"
if [[ $memory_only == 0 ]]; then
echo "    taskset -c $client_cpu redis-benchmark -p PORT -t TEST -n $requests -r $keyspace -c $clients -P 1 --csv"
echo "    taskset -c $client_cpu redis-benchmark -p PORT -t TEST -n $requests_p16 -r $keyspace -c $clients -P 16 --csv"
fi
echo "    python3 (RESP generator in this script) | redis-cli -p PORT --pipe   # memory per item"
