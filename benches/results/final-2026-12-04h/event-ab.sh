#!/bin/bash
# Event-mode A/B in ONE VM boot (issue 15): perftest ib_send_lat -R -e, then rdma_perf event
# mode from binary A (/work/abbin/A) and B (/work/abbin/B), interleaved, ROUNDS times.
#   cargo xtask vm -- benches/results/final-2026-12-04h/event-ab.sh
set -u
SIZE=${SIZE:-4096}; ROUNDS=${ROUNDS:-5}; ITERS=${ITERS:-2000}; DUR_MS=${DUR_MS:-2000}
IP=${IP:-10.77.0.1}; DEV=${DEV:-rxe0}
OUT=$(mktemp -d)
perftest() {
  timeout 120 ib_send_lat -d "$DEV" -R -s "$SIZE" -n "$ITERS" -e > "$OUT/srv.log" 2>&1 & local sp=$!
  sleep 1
  for _ in 1 2 3 4 5 6 7 8; do
    timeout 120 ib_send_lat -d "$DEV" -R -s "$SIZE" -n "$ITERS" -e "$IP" > "$OUT/cli.log" 2>&1 && break
    sleep 1
  done
  wait $sp
  awk -v s="$SIZE" '$1==s && NF>=9 {printf "{\"row\":\"perftest -e\",\"p50_us\":%.2f,\"avg_us\":%.2f,\"p99_us\":%.2f}\n", 2*$5, 2*$6, 2*$8}' "$OUT/cli.log"
}
cw() { local name=$1; shift
  "$@" --size "$SIZE" --duration-ms "$DUR_MS" --warmup-ms 500 --idle-ms 1000 --transport rdma 2>/dev/null \
    | grep '^{' | sed "s/^{/{\"row\":\"$name\",/"
}
echo "# event-ab: size=$SIZE rounds=$ROUNDS ($(uname -r), $(nproc) vCPUs)"
for r in $(seq 1 "$ROUNDS"); do
  perftest
  if [ -n "${VARIANTS:-}" ]; then
    # VARIANTS: rows "name=binary-dir:extra args;..." (e.g. "B spin0=B:--spin-us 0")
    IFS=';' read -ra vs <<< "$VARIANTS"
    for v in "${vs[@]}"; do
      name=${v%%=*}; rest=${v#*=}; dir=${rest%%:*}; args=${rest#*:}
      # shellcheck disable=SC2086 # extra args split on purpose
      cw "$name" /work/abbin/$dir/rdma_perf --mode event $args
    done
    continue
  fi
  cw "A event" /work/abbin/A/rdma_perf --mode event
  cw "B event" /work/abbin/B/rdma_perf --mode event
  cw "B polling" /work/abbin/B/rdma_perf --mode polling
  cw "A polling" /work/abbin/A/rdma_perf --mode polling
done | tee "$OUT/all.jsonl"
python3 - "$OUT/all.jsonl" <<'PY'
import json, sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    if line.startswith('{'):
        d = json.loads(line); rows.setdefault(d['row'], []).append(d)
med = lambda n, k: st.median([r[k] for r in rows.get(n, []) if k in r])
print("| row | rounds | p50 µs | avg µs | p99 µs |"); print("|---|---|---|---|---|")
for n, rs in rows.items():
    print(f"| {n} | {len(rs)} | {med(n,'p50_us'):.1f} | {med(n,'avg_us'):.1f} | {med(n,'p99_us'):.1f} |")
pe = med("perftest -e", "p50_us")
for n in rows:
    if n != "perftest -e": print(f"- {n} p50 / perftest -e p50: {med(n,'p50_us')/pe:.2f}x")
for v in ("AB" if "A polling" in rows else ""):
    print(f"- {v} event p50 / perftest -e p50: {med(v+' event','p50_us')/pe:.2f}x; event avg / polling avg: {med(v+' event','avg_us')/med(v+' polling','avg_us'):.2f}x")
PY
