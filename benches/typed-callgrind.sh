#!/usr/bin/env bash
# Instructions per call of the typed layer and of the raw `Service`, counted with callgrind:
#
#   benches/typed-callgrind.sh LABEL [BIN]
#
# PATHS (default "raw typed async") picks the paths: raw is the raw `Service`, typed the
# generated echo whose handler is synchronous (`call_now`), async the same handler as an
# `async fn` (`--typed --async-handler`, served through `call`'s future).
#
# Runs `rpc_typed_micro` (BIN, default $CARGO_TARGET_DIR/release/rpc_typed_micro: client and
# server over in-memory connections on one shard, on the epoll backend since io_uring does not
# run under valgrind), raw and typed, 64 B and 4 KiB, at N and 2N calls (N = CALLS, default
# 10000; the bench runs a multiple of 64 of them, 9,984 and 19,968): Ir per call =
# (Ir at 2N - Ir at N) / calls(N), so start-up cancels out. The warm-up round (a tenth of the
# loop count) grows with N too: the difference holds 11,008 calls at N = 10000, not 9,984, so
# the figure is ~10 % above the true cost per call (the formula BENCHMARKS' earlier tables
# used, kept for comparison; ratios between paths are unaffected). Prints one
# line per path and size; the callgrind dumps stay under $OUT (default /tmp/typed-callgrind).
#
# glibc copies 2,112 bytes or more with `rep movsb` (unless source and destination alias in
# the low 12 bits, and a few other cases), which callgrind counts as one instruction per byte
# against about one per 10 bytes for the vector loop it uses otherwise: a 4 KiB copy then
# counts ~4,100 or ~400 depending on the buffers' addresses, which swamps the figures at
# 4 KiB. So the copies are made with the vector loop throughout (GLIBC_TUNABLES below), and
# count in proportion to the bytes copied; REP_MOVSB=1 leaves glibc's choice.
set -euo pipefail
if [ "${REP_MOVSB:-0}" != 1 ]; then
  export GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=0x7fffffffffffffff
fi
label=$1
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin=${2:-${CARGO_TARGET_DIR:-$repo/target}/release/rpc_typed_micro}
out=${OUT:-/tmp/typed-callgrind}
n=${CALLS:-10000}
mkdir -p "$out"
ir() { # FILE: total Ir of a callgrind dump
  awk '/^summary:/ {print $2}' "$1"
}
for size in 64 4096; do
  for path in ${PATHS:-raw typed async}; do
    case $path in
      raw) flag=() ;;
      typed) flag=(--typed) ;;
      async) flag=(--typed --async-handler) ;;
      *) echo "unknown path $path" >&2; exit 2 ;;
    esac
    for calls in "$n" $((2 * n)); do
      f=$out/$label.$path.$size.$calls
      COREWIRE_BACKEND=epoll valgrind --tool=callgrind --callgrind-out-file="$f" \
        "$bin" "${flag[@]}" --size "$size" --calls "$calls" >/dev/null 2>&1
    done
    made=$(( n / 64 * 64 ))
    a=$(ir "$out/$label.$path.$size.$n") b=$(ir "$out/$label.$path.$size.$((2 * n))")
    echo "$label $path $size: Ir(N)=$a Ir(2N)=$b Ir/call=$(python3 -c "print(f'{($b - $a) / $made:.1f}')")"
  done
done
