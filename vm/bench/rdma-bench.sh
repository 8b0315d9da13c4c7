#!/bin/bash
# The RDMA benchmark of BENCHMARKS.md, run INSIDE the soft-RoCE VM (one boot):
#   cargo build --release --example rdma_perf && cargo xtask vm -- vm/bench/rdma-bench.sh
# perftest's ib_send_lat (polling and -e, rdma_cm) at the same message size, then corewire's
# rdma_perf in polling, event and adaptive modes and over TCP, ROUNDS times each, interleaved.
# perftest prints HALF the round trip; the table doubles it so every row is a full round trip.
# Knobs: SIZE (4096) ROUNDS (3) ITERS (perftest iterations, 2000) DUR_MS (rdma_perf, 2000)
set -u
SIZE=${SIZE:-4096}; ROUNDS=${ROUNDS:-3}; ITERS=${ITERS:-2000}; DUR_MS=${DUR_MS:-2000}
IP=${IP:-10.77.0.1}; DEV=${DEV:-rxe0}
PERF=${RDMA_PERF:-target/release/examples/rdma_perf}
[ -x "$PERF" ] || { echo "build it first: cargo build --release --example rdma_perf" >&2; exit 1; }
OUT=$(mktemp -d)

perftest() { # name, extra args
  local name=$1; shift
  timeout 120 ib_send_lat -d "$DEV" -R -s "$SIZE" -n "$ITERS" "$@" > "$OUT/srv.log" 2>&1 & local sp=$!
  sleep 1
  local ok=1
  for _ in 1 2 3 4 5 6 7 8; do
    timeout 120 ib_send_lat -d "$DEV" -R -s "$SIZE" -n "$ITERS" "$@" "$IP" > "$OUT/cli.log" 2>&1 && { ok=0; break; }
    sleep 1
  done
  wait $sp
  [ $ok = 0 ] || { echo "perftest $name failed:" >&2; tail -5 "$OUT/cli.log" >&2; return 1; }
  # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%  (microseconds, half RTT)
  awk -v n="$name" -v s="$SIZE" '$1==s && NF>=9 {printf "{\"row\":\"%s\",\"p50_us\":%.2f,\"avg_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f}\n", n, 2*$5, 2*$6, 2*$8, 2*$9}' "$OUT/cli.log"
}

corewire() { # name, args
  local name=$1; shift
  "$PERF" --size "$SIZE" --duration-ms "$DUR_MS" --warmup-ms 500 --idle-ms 1000 "$@" 2>/dev/null \
    | grep '^{' | sed "s/^{/{\"row\":\"$name\",/"
}

echo "# rdma-bench: size=$SIZE rounds=$ROUNDS perftest_iters=$ITERS rdma_perf_ms=$DUR_MS device=$DEV ($(uname -r), $(nproc) vCPUs)"
for r in $(seq 1 "$ROUNDS"); do
  perftest "perftest ib_send_lat -R (polling)"
  perftest "perftest ib_send_lat -R -e (event)" -e
  corewire "corewire rdma polling" --transport rdma --mode polling
  corewire "corewire rdma event" --transport rdma --mode event
  corewire "corewire rdma event+solicited" --transport rdma --mode event --solicited on
  corewire "corewire rdma adaptive" --transport rdma --mode adaptive
  corewire "corewire rdma adaptive:2000" --transport rdma --mode adaptive:2000
  corewire "corewire rdma adaptive+solicited" --transport rdma --mode adaptive --solicited on
  corewire "corewire tcp" --transport tcp
done | tee "$OUT/all.jsonl"

python3 - "$OUT/all.jsonl" <<'PY'
import json, sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith('{'): continue
    d = json.loads(line); rows.setdefault(d['row'], []).append(d)
def med(rs, k):
    v = [r[k] for r in rs if k in r]
    return st.median(v) if v else None
print()
print("| row | rounds | p50 µs | avg µs | p99 µs | p99.9 µs | QPS | server CPU % | server idle CPU % |")
print("|---|---|---|---|---|---|---|---|---|")
for name, rs in rows.items():
    f = lambda k, fmt="{:.1f}": (fmt.format(med(rs, k)) if med(rs, k) is not None else "—")
    print(f"| {name} | {len(rs)} | {f('p50_us')} | {f('avg_us')} | {f('p99_us')} | {f('p999_us')} | {f('qps', '{:.0f}')} | {f('server_cpu_pct', '{:.0f}')} | {f('server_idle_cpu_pct')} |")
def get(n, k):
    return med(rows.get(n, []), k)
pp, pe = get("perftest ib_send_lat -R (polling)", "p50_us"), get("perftest ib_send_lat -R -e (event)", "p50_us")
cp, ce, ca = (get(f"corewire rdma {m}", k) for m, k in (("polling", "p50_us"), ("event", "p50_us"), ("adaptive", "p50_us")))
ap, aa = get("corewire rdma polling", "avg_us"), get("corewire rdma event", "avg_us")
print()
if pp and cp: print(f"- polling round trip vs perftest polling (p50): {cp/pp:.2f}x (target <= 1.5x)")
if pe and ce: print(f"- event round trip vs perftest event (p50): {ce/pe:.2f}x (target <= 1.5x)")
ces = get("corewire rdma event+solicited", "p50_us")
if pe and ces: print(f"- event+solicited round trip vs perftest event (p50): {ces/pe:.2f}x (target <= 1.5x)")
if ap and aa: print(f"- event avg / polling avg: {aa/ap:.2f}x (target >= 2x)")
aas = get("corewire rdma event+solicited", "avg_us")
if ap and aas: print(f"- event+solicited avg / polling avg: {aas/ap:.2f}x (target >= 2x)")
if cp and ca: print(f"- adaptive p50 / polling p50 under load: {ca/cp:.2f}x (target <= 1.25x)")
ca2 = get("corewire rdma adaptive:2000", "p50_us")
if cp and ca2: print(f"- adaptive (2 ms idle spin) p50 / polling p50: {ca2/cp:.2f}x")
ia = get("corewire rdma adaptive", "server_idle_cpu_pct"); ip = get("corewire rdma polling", "server_idle_cpu_pct")
if ia is not None: print(f"- idle server CPU: adaptive {ia:.1f}% vs polling {ip:.1f}% (target adaptive < 10%)")
PY
rm -rf "$OUT"
