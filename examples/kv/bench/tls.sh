#!/usr/bin/env bash
# KV over TLS: corewire-kv (1 shard) vs redis-server, both serving a TLS port, each alone on
# SERVER_CPU (0), redis-benchmark --tls on CLIENT_CPU (1).
#   1. SET and GET at -P 1 and -P 16 (CLIENTS connections): requests/s and server CPU seconds
#      per million requests (utime+stime from /proc/PID/stat around each run);
#   2. new TLS handshakes per second per core: redis-benchmark -k 0 (a new connection, hence a
#      full handshake, for every request; hiredis resumes no session) running PING, and the
#      server CPU per handshake.
# Medians of ROUNDS interleaved rounds. The certificate (ECDSA P-256, like rcgen's) and CA
# are made by openssl in a temporary directory at start; no key is kept. Both servers use
# TLS 1.3 with their default cipher (AES-128-GCM for rustls, AES-256-GCM for OpenSSL unless
# --ciphersuites pins one: the default pins TLS_AES_128_GCM_SHA256 on both).
#
# Usage: examples/kv/bench/tls.sh [--requests N (200000)] [--requests-p16 N (2000000)]
#            [--handshakes N (20000)] [--rounds R (5)] [--clients C (50)] [--quick] [--no-build]
#   --quick = --requests 2000 --requests-p16 20000 --handshakes 500 --rounds 1 (smoke run)
# Environment: SERVER_CPU (0), CLIENT_CPU (1), COREWIRE_KV (path; default: build, release),
# COREWIRE_KV_ARGS (extra corewire-kv flags).
set -euo pipefail

requests=200000
requests_p16=2000000
handshakes=20000
rounds=5
clients=50
build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --requests) requests="$2"; shift 2 ;;
        --requests-p16) requests_p16="$2"; shift 2 ;;
        --handshakes) handshakes="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --quick) requests=2000; requests_p16=20000; handshakes=500; rounds=1; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "tls.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
server_cpu="${SERVER_CPU:-0}"
client_cpu="${CLIENT_CPU:-1}"
for tool in redis-benchmark redis-server redis-cli openssl; do
    command -v "$tool" >/dev/null || { echo "tls.sh: $tool not found (apt-get install redis-tools redis-server openssl)" >&2; exit 1; }
done
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=kv-binary.sh
source "$here/kv-binary.sh"
[[ -x "$kv" ]] || { echo "tls.sh: $kv missing" >&2; exit 1; }

work="$(mktemp -d)"
declare -A pid port
cleanup() {
    for name in "${!pid[@]}"; do kill "${pid[$name]}" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# A CA and a server certificate for 127.0.0.1 / localhost.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$work/ca.key" -out "$work/ca.crt" -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$work/server.key" -out "$work/server.csr" -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$work/san.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" \
    -CAcreateserial -days 2 -extfile "$work/san.ext" -out "$work/server.crt" 2>/dev/null
tls_args=(--tls-cert-file "$work/server.crt" --tls-key-file "$work/server.key"
    --tls-ca-cert-file "$work/ca.crt" --tls-auth-clients no
    --tls-ciphersuites TLS_AES_128_GCM_SHA256)

tck="$(getconf CLK_TCK)"
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() {
    local name="$1" cmd
    port[$name]="$(free_port)"
    if [[ $name == corewire ]]; then
        # shellcheck disable=SC2206 # COREWIRE_KV_ARGS is split into flags on purpose
        cmd=("$kv" --shards 1 --port 0 --tls-port "${port[$name]}" "${tls_args[@]}" ${COREWIRE_KV_ARGS:-})
    else
        mkdir -p "$work/redis"
        cmd=(redis-server --port 0 --tls-port "${port[$name]}" "${tls_args[@]}"
            --save "" --appendonly no --dir "$work/redis")
    fi
    echo "server $name: taskset -c $server_cpu ${cmd[*]}" >&2
    taskset -c "$server_cpu" "${cmd[@]}" >"$work/$name.log" 2>&1 &
    pid[$name]=$!
    for _ in $(seq 1 100); do
        redis-cli --tls --cacert "$work/ca.crt" -p "${port[$name]}" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "tls.sh: $name did not come up: $(tail -3 "$work/$name.log")" >&2
    exit 1
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# One run: "rps cpu_s_per_Mreq". $4: extra redis-benchmark flags.
bench_once() {
    local name="$1" t="$2" p="$3" n="$4" extra="${5:-}" before after csv
    before="$(cpu_ticks "${pid[$name]}")"
    # shellcheck disable=SC2086 # extra flags are split on purpose
    csv="$(taskset -c "$client_cpu" redis-benchmark --tls --cacert "$work/ca.crt" \
        -p "${port[$name]}" -t "$t" -n "$n" -r 100000 -c "$clients" -P "$p" $extra --csv \
        2>/dev/null | tail -n 1)"
    after="$(cpu_ticks "${pid[$name]}")"
    echo "$csv" | awk -F'"' -v b="$before" -v a="$after" -v tk="$tck" -v n="$n" \
        '{ printf "%s %.3f\n", $4, (a - b) / tk / (n / 1e6) }'
}

start redis; start corewire
for round in $(seq 1 "$rounds"); do
    for p in 1 16; do
        n="$requests"; [[ $p == 16 ]] && n="$requests_p16"
        for t in set get; do
            for name in redis corewire; do
                line="$(bench_once "$name" "$t" "$p" "$n")"
                echo "$line" >>"$work/runs.$name.$t.$p"
                echo "  round $round $name ${t^^} -P $p: $line" >&2
            done
        done
    done
    for name in redis corewire; do
        line="$(bench_once "$name" ping_mbulk 1 "$handshakes" "-k 0")"
        echo "$line" >>"$work/runs.$name.handshake"
        echo "  round $round $name handshakes (-k 0 PING): $line" >&2
    done
done

col() { awk -v c="$1" '{ print $c }' "$2" | median; }
echo "## KV over TLS: corewire-kv (1 shard) vs redis-server $(redis-server --version | awk '{print $3}' | sed 's/v=//'), TLS 1.3 AES-128-GCM"
echo
echo "Servers on CPU $server_cpu, redis-benchmark --tls on CPU $client_cpu; medians of $rounds rounds;"
echo "$clients clients; $requests requests at -P 1, $requests_p16 at -P 16; handshakes: $handshakes requests with -k 0."
echo
echo "| test | -P | redis rps | corewire rps | ratio | redis CPU s/Mreq | corewire CPU s/Mreq | CPU ratio |"
echo "|---|---|---|---|---|---|---|---|"
for p in 1 16; do
    for t in set get; do
        r="$work/runs.redis.$t.$p"; c="$work/runs.corewire.$t.$p"
        printf "| %s | %s | %.0f | %.0f | %s | %s | %s | %s |\n" "${t^^}" "$p" \
            "$(col 1 "$r")" "$(col 1 "$c")" "$(ratio "$(col 1 "$c")" "$(col 1 "$r")")" \
            "$(col 2 "$r")" "$(col 2 "$c")" "$(ratio "$(col 2 "$c")" "$(col 2 "$r")")"
    done
done
r="$work/runs.redis.handshake"; c="$work/runs.corewire.handshake"
printf "| new TLS handshakes/s (-k 0) | 1 | %.0f | %.0f | %s | %s | %s | %s |\n" \
    "$(col 1 "$r")" "$(col 1 "$c")" "$(ratio "$(col 1 "$c")" "$(col 1 "$r")")" \
    "$(col 2 "$r")" "$(col 2 "$c")" "$(ratio "$(col 2 "$c")" "$(col 2 "$r")")"
