#!/usr/bin/env bash
# Cluster benchmark: `redis-benchmark --cluster` against a 3-node corewire-kv cluster
# and a 3-node redis-server cluster (both formed by examples/kv/cluster.sh, no replicas), SET and
# GET at -P 1 and -P 16; medians of ROUNDS interleaved rounds of requests/s, p50 and the nodes'
# total CPU seconds per million requests; corewire / redis ratios. The report states the
# oversubscription: 3 single-shard nodes plus redis-benchmark's threads on this machine's CPUs.
#
# Usage: examples/kv/bench/cluster.sh [--requests N (1000000)] [--rounds R (5)] [--clients C (50)]
#            [--threads T (2)] [--nodes N (3)] [--quick] [--no-build]
#   --quick = --requests 5000 --rounds 1 (smoke run)
# Environment: COREWIRE_KV (path; default: build, release).
set -euo pipefail

requests=1000000 rounds=5 clients=50 threads=2 nodes=3 build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --requests) requests="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --nodes) nodes="$2"; shift 2 ;;
        --quick) requests=5000; rounds=1; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=kv-binary.sh
source "$here/kv-binary.sh"
kv="$(realpath "$kv")"
cluster="$repo/examples/kv/cluster.sh"

work="$(mktemp -d)"
# Ports: each node takes PORT and its cluster bus PORT+10000. Both must lie below the kernel's
# ephemeral range: a port in it may be held by some client socket (a loaded machine keeps
# thousands in TIME_WAIT), and then redis-server cannot bind it and exits (how the redis
# cluster once failed to come up: "Could not connect to Redis at 127.0.0.1:31712").
ephemeral_low="$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range)"
# Whether no TCP socket in any state uses a port of a cluster based at $1.
cluster_ports_free() {
    local p
    for i in $(seq 0 $((nodes - 1))); do
        for p in $(($1 + i)) $(($1 + i + 10000)); do
            [[ -z "$(ss -Htan "sport = :$p")" ]] || return 1
        done
    done
}
# The first base at or after $1 whose ports are all free and below the ephemeral range.
pick_base() {
    local b=$1
    until cluster_ports_free "$b"; do b=$((b + nodes)); done
    if ((b + nodes - 1 + 10000 >= ephemeral_low)); then
        echo "cluster.sh: no free cluster ports below the ephemeral range ($ephemeral_low)" >&2
        exit 1
    fi
    echo "$b"
}
declare -A base
base[redis]="$(pick_base $((11000 + RANDOM % 4000)))"
base[corewire]="$(pick_base $((base[redis] + nodes)))"
cleanup() {
    for name in redis corewire; do "$cluster" stop --dir "$work/$name" >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap cleanup EXIT
"$cluster" start --server redis --nodes "$nodes" --base-port "${base[redis]}" --dir "$work/redis" >&2
"$cluster" start --server corewire --bin "$kv" --nodes "$nodes" --base-port "${base[corewire]}" \
    --dir "$work/corewire" >&2

# One run: "rps p50_ms cpu_s_per_Mreq".
bench_once() {
    local name="$1" t="$2" p="$3" before after csv
    before="$("$cluster" cpu --dir "$work/$name")"
    csv="$(redis-benchmark --cluster -p "${base[$name]}" -t "$t" -n "$requests" -r 100000 \
        -c "$clients" -P "$p" --threads "$threads" --csv 2>/dev/null | grep -i "^\"$t\"" | tail -n 1)"
    after="$("$cluster" cpu --dir "$work/$name")"
    echo "$csv" | awk -F'"' -v b="$before" -v a="$after" -v n="$requests" \
        '{ printf "%s %s %.3f\n", $4, $10, (a - b) / (n / 1e6) }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
col() { awk -v c="$1" '{ print $c }' "$2" | median; }

tests=(set get) pipelines=(1 16)
for round in $(seq 1 "$rounds"); do
    for p in "${pipelines[@]}"; do
        for t in "${tests[@]}"; do
            for name in redis corewire; do
                line="$(bench_once "$name" "$t" "$p")"
                echo "$line" >>"$work/runs.$name.$t.$p"
                echo "  round $round $name ${t^^} -P $p: $line" >&2
            done
        done
    done
done

echo "## Cluster: $nodes-node corewire-kv vs $nodes-node redis-server $(redis-server --version | awk '{print $3}' | sed 's/v=//') cluster"
echo
echo "Oversubscribed: $nodes single-shard nodes of each cluster (one cluster loaded at a time) and"
echo "redis-benchmark (--threads $threads) share $(nproc) CPUs, unpinned."
echo "Medians of $rounds interleaved rounds; $requests requests per run, $clients clients, -r 100000."
echo "CPU = all nodes' utime+stime per million requests (s/Mreq)."
echo
echo "| test | -P | redis rps | corewire rps | ratio | redis p50 ms | corewire p50 ms | redis CPU s/Mreq | corewire CPU s/Mreq | CPU ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for p in "${pipelines[@]}"; do
    for t in "${tests[@]}"; do
        r="$work/runs.redis.$t.$p"; c="$work/runs.corewire.$t.$p"
        printf "| %s | %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s |\n" "${t^^}" "$p" \
            "$(col 1 "$r")" "$(col 1 "$c")" "$(ratio "$(col 1 "$c")" "$(col 1 "$r")")" \
            "$(col 2 "$r")" "$(col 2 "$c")" "$(col 3 "$r")" "$(col 3 "$c")" \
            "$(ratio "$(col 3 "$c")" "$(col 3 "$r")")"
    done
done
echo
echo "Commands (ports vary per run):"
echo
echo "    examples/kv/cluster.sh start --server redis --nodes $nodes --base-port BASE --dir DIR"
echo "    examples/kv/cluster.sh start --server corewire --bin $kv --nodes $nodes --base-port BASE --dir DIR"
echo "    redis-benchmark --cluster -p BASE -t set|get -n $requests -r 100000 -c $clients -P 1|16 --threads $threads --csv"
