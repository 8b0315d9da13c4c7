#!/usr/bin/env bash
# One command per benchmark suite; each prints its figures and the commands that produced them.
#
#   benches/run.sh percore     per-core echo (issue 9): server alone on SERVER_CPU, loadgen on
#                              CLIENT_CPU; corewire (1 shard) vs tokio current-thread, monoio,
#                              glommio (1 executor) and the raw io_uring kernel floor; 64 and 256
#                              conns x depth 4, 64 B and 4 KiB. A timing pass (medians of ROUNDS
#                              interleaved rounds), then a shorter pass with perf counting the
#                              server's io_uring enters and syscalls per request (perf adds a
#                              tracepoint hit per syscall, so those figures come from their own pass).
#
# Environment:
#   QUICK=1          smoke run: 1 round, 200 ms windows (proves the suite works; no figures)
#   ROUNDS (5)  DURATION_MS (2000)  WARMUP_MS (500)
#   SERVER_CPU (0)  CLIENT_CPU (1)
#   SERVERS          comma list (default corewire,tokio-ct,monoio,glommio-1,floor)
#   WORKLOAD         only workloads whose label contains this (e.g. '256 conn')
#   BIN_DIR          where benchctl, loadgen and the peers are (default: build them, release)
#   COREWIRE_ECHO    corewire's echo_server example (default: built with the peers)
#   JSON_OUT         append every raw measurement here
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
        --client-cpus "$client_cpu" --warmup-ms "$warmup")
    [[ -n "${SERVERS:-}" ]] && common+=(--servers "$SERVERS")
    [[ -n "${WORKLOAD:-}" ]] && common+=(--workload "$WORKLOAD")
    [[ -n "${JSON_OUT:-}" ]] && common+=(--json-out "$JSON_OUT")
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

case "$suite" in
    percore) percore ;;
    -h|--help|"") sed -n '2,25p' "$0"; [[ -n "$suite" ]] ;;
    *) echo "run.sh: unknown suite $suite (percore)" >&2; exit 2 ;;
esac
