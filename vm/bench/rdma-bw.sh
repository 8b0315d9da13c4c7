#!/bin/bash
# The RDMA bandwidth comparison of BENCHMARKS.md, run INSIDE the soft-RoCE VM
# (one boot):
#   cargo build --release --example rdma_perf && cargo xtask vm -- vm/bench/rdma-bw.sh
# For each message size: perftest's ib_send_bw -R and ib_write_bw -R (rdma_cm), then corewire's
# rdma_perf in bandwidth mode (requests of SIZE bytes, empty replies, DEPTH calls in flight),
# ROUNDS times each, interleaved. Figures are MiB/s (2^20 bytes, perftest's unit), one way.
# Knobs: SIZES ("65536 262144 1048576") ROUNDS (3) BYTES (per perftest run, 64 MiB)
#        DEPTH (16) DUR_MS (rdma_perf, 3000) MODE (rdma_perf poller mode, polling)
#        VARIANTS ("read copy registered": corewire's large-message paths, one row each:
#        `read` = attachments from 64 KiB by RDMA READ, registered per message (the default
#        threshold is 256 KiB); `copy` = --large-threshold off, copied through the send chunks;
#        `registered` = the attachment is a RegisteredBuf, registered once) PERFTEST (1; 0 skips)
set -u
SIZES=${SIZES:-65536 262144 1048576}; ROUNDS=${ROUNDS:-3}; BYTES=${BYTES:-67108864}
DEPTH=${DEPTH:-16}; DUR_MS=${DUR_MS:-3000}; MODE=${MODE:-polling}
VARIANTS=${VARIANTS:-read copy registered}; PERFTEST=${PERFTEST:-1}
IP=${IP:-10.77.0.1}; DEV=${DEV:-rxe0}
PERF=${RDMA_PERF:-target/release/examples/rdma_perf}
[ -x "$PERF" ] || { echo "build it first: cargo build --release --example rdma_perf" >&2; exit 1; }
OUT=$(mktemp -d)

perftest() { # tool, size
  local tool=$1 size=$2
  local iters=$(( BYTES / size )); [ "$iters" -ge 5 ] || iters=5
  timeout 300 "$tool" -d "$DEV" -R -s "$size" -n "$iters" > "$OUT/srv.log" 2>&1 & local sp=$!
  sleep 1
  local ok=1
  for _ in 1 2 3 4 5 6 7 8; do
    timeout 300 "$tool" -d "$DEV" -R -s "$size" -n "$iters" "$IP" > "$OUT/cli.log" 2>&1 && { ok=0; break; }
    sleep 1
  done
  wait $sp
  [ $ok = 0 ] || { echo "perftest $tool $size failed:" >&2; tail -5 "$OUT/cli.log" >&2; return 1; }
  # #bytes #iterations BW peak[MiB/sec] BW average[MiB/sec] MsgRate[Mpps]
  awk -v n="perftest $tool -R" -v s="$size" '$1==s && NF>=5 {printf "{\"row\":\"%s\",\"size\":%d,\"mib_s\":%.2f}\n", n, s, $4}' "$OUT/cli.log"
}

variant_flags() {
  case $1 in
    read) echo "--large-threshold 65536" ;;
    copy) echo "--large-threshold off" ;;
    registered) echo "--registered on" ;;
    *) echo "unknown variant $1" >&2; return 1 ;;
  esac
}

corewire() { # size variant
  # shellcheck disable=SC2046 # the flags split on purpose
  "$PERF" --bandwidth on --mode "$MODE" --depth "$DEPTH" --size "$1" --duration-ms "$DUR_MS" \
    --warmup-ms 1000 --idle-ms 0 $(variant_flags "$2") 2>/dev/null \
    | grep '^{' | sed 's/"send_mib_s"/"mib_s"/' \
    | sed "s/^{/{\"row\":\"corewire rdma_perf --bandwidth on ($2)\",/"
}

echo "# rdma-bw: sizes=$SIZES rounds=$ROUNDS perftest_bytes=$BYTES depth=$DEPTH rdma_perf_ms=$DUR_MS mode=$MODE variants=$VARIANTS device=$DEV ($(uname -r), $(nproc) vCPUs)"
for r in $(seq 1 "$ROUNDS"); do
  for size in $SIZES; do
    if [ "$PERFTEST" = 1 ]; then
      perftest ib_send_bw "$size"
      perftest ib_write_bw "$size"
    fi
    for v in $VARIANTS; do corewire "$size" "$v"; done
  done
done | tee "$OUT/all.jsonl"

python3 - "$OUT/all.jsonl" <<'PY'
import json, sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith('{'): continue
    d = json.loads(line); rows.setdefault((d['row'], d['size']), []).append(d['mib_s'])
med = lambda k: st.median(rows[k]) if rows.get(k) else None
names = sorted({n for n, _ in rows}); sizes = sorted({s for _, s in rows})
print()
print("| row | " + " | ".join(f"{s // 1024} KiB MiB/s" for s in sizes) + " |")
print("|---|" + "---|" * len(sizes))
for n in names:
    cells = [med((n, s)) for s in sizes]
    print(f"| {n} | " + " | ".join("—" if c is None else f"{c:.1f}" for c in cells) + " |")
print()
for cw in [n for n in names if n.startswith("corewire")]:
    for s in sizes:
        c = med((cw, s))
        for tool in ("ib_send_bw", "ib_write_bw"):
            p = med((f"perftest {tool} -R", s))
            if c and p:
                target = " (target >= 0.8x)" if s == 1 << 20 else ""
                print(f"- {s // 1024} KiB, {cw}: / {tool} -R = {c / p:.2f}x{target}")
PY
rm -rf "$OUT"
