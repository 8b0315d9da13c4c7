#!/bin/bash
# RDMA fairness, run INSIDE the soft-RoCE VM (one boot):
#   cargo build --release --example rdma_fairness
#   cargo xtask vm -- vm/bench/rdma-fairness.sh | tee rdma-fairness.log
# The layout of `benches/run.sh fairness` over RDMA: one server shard (CQ poller in polling
# mode; event mode for EVENT_BUDGETS), the RPC echo service hashing each 64 B payload
# HASH_ROUNDS times, HOT_CONNS connections x HOT_DEPTH calls on one listener + a depth-1 probe
# on its own listener; the client is a second runtime (one shard, event mode) in the same
# process. Each variant runs ROUNDS times, interleaved (each round rotated by one); the table shows medians (the two
# RDMA counters: the largest value of any round).
# Knobs: ROUNDS (3) DUR_MS (4000) WARMUP_MS (500) BUDGETS (unlimited,64,32,16,4)
#        EVENT_BUDGETS (unlimited,32; empty: none) HASH_ROUNDS (32) HOT_CONNS (8) HOT_DEPTH (256)
set -u
ROUNDS=${ROUNDS:-3}; DUR_MS=${DUR_MS:-4000}; WARMUP_MS=${WARMUP_MS:-500}
BUDGETS=${BUDGETS:-unlimited,64,32,16,4}; EVENT_BUDGETS=${EVENT_BUDGETS-unlimited,32}
HASH_ROUNDS=${HASH_ROUNDS:-32}; HOT_CONNS=${HOT_CONNS:-8}; HOT_DEPTH=${HOT_DEPTH:-256}
BIN=${RDMA_FAIRNESS:-target/release/examples/rdma_fairness}
[ -x "$BIN" ] || { echo "build it first: cargo build --release --example rdma_fairness" >&2; exit 1; }
OUT=$(mktemp -d)

variants=()
for b in ${BUDGETS//,/ }; do variants+=("polling $b"); done
for b in ${EVENT_BUDGETS//,/ }; do variants+=("event $b"); done

one() { # mode budget
  local cmd=("$BIN" --mode "$1" --budget "$2" --hot-conns "$HOT_CONNS" --hot-depth "$HOT_DEPTH"
             --hash-rounds "$HASH_ROUNDS" --duration-ms "$DUR_MS" --warmup-ms "$WARMUP_MS")
  echo "# ${cmd[*]}" >&2
  timeout 120 "${cmd[@]}" 2>"$OUT/err.log" | grep '^{' || { echo "# failed: $1 $2" >&2; tail -5 "$OUT/err.log" >&2; }
}

echo "# rdma-fairness: rounds=$ROUNDS duration_ms=$DUR_MS warmup_ms=$WARMUP_MS hot=${HOT_CONNS}x$HOT_DEPTH hash_rounds=$HASH_ROUNDS ($(uname -r), $(nproc) vCPUs, $(date -u +%FT%TZ))"
n=${#variants[@]}
for r in $(seq 1 "$ROUNDS"); do
  # Each round starts one variant later, so no variant always runs first (load drifts).
  for i in $(seq 0 $((n - 1))); do one ${variants[$(((i + r - 1) % n))]}; done
done | tee "$OUT/all.jsonl"

python3 - "$OUT/all.jsonl" "$HOT_CONNS" <<'PY'
import json, sys, statistics as st
rows, hot = {}, int(sys.argv[2])
for line in open(sys.argv[1]):
    if line.startswith('{'):
        d = json.loads(line); rows.setdefault((d['mode'], d['budget']), []).append(d)
med = lambda rs, k: st.median(r[k] for r in rs)
top = lambda rs, k: max(r[k] for r in rs)
print()
print("| poller | budget | runs | probe calls | hot calls in flight | probe p50 µs | probe p99 µs | probe p99.9 µs | probe HOL p50 | probe HOL p99 | probe HOL max | hot msgs/s | max recv CQEs / conn / poll | max frames / conn / round | budget yields | srv CQEs / call | srv CPU % | cli CPU % | probe p99 vs unlimited | probe HOL p99 vs unlimited | hot tput vs unlimited |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (mode, budget), rs in rows.items():
    base = rows.get((mode, 'unlimited'))
    ratio = lambda k: f"{med(rs, k) / med(base, k):.2f}×" if base and med(base, k) else "—"
    print(f"| {mode} | {budget} | {len(rs)} | {med(rs, 'probe_calls'):.0f} | {med(rs, 'hot_in_flight'):.0f} | {med(rs, 'probe_p50_us'):.0f} | "
          f"{med(rs, 'probe_p99_us'):.0f} | {med(rs, 'probe_p999_us'):.0f} | {med(rs, 'probe_hol_p50'):.0f} | "
          f"{med(rs, 'probe_hol_p99'):.0f} | {top(rs, 'probe_hol_max')} | {med(rs, 'hot_msgs_s'):.0f} | "
          f"{top(rs, 'max_conn_recvs_per_poll')} | {top(rs, 'max_round_frames')} | {med(rs, 'budget_exhausted'):.0f} | {med(rs, 'cqes_per_call'):.2f} | {med(rs, 'server_cpu_pct'):.0f} | {med(rs, 'client_cpu_pct'):.0f} | "
          f"{ratio('probe_p99_us')} | {ratio('probe_hol_p99')} | {ratio('hot_msgs_s')} |")
print()
for mode in sorted({m for m, _ in rows}):
    u, b = rows.get((mode, 'unlimited')), rows.get((mode, '32'))
    if not (u and b):
        continue
    bound = 32 * hot + 32
    hol, hol_u = med(b, 'probe_hol_p99'), med(u, 'probe_hol_p99')
    ok = lambda c: "met" if c else "missed"
    times = f"{hol_u / hol:.1f}x smaller" if hol else "0 at budget 32"
    print(f"- {mode}, budget 32: probe HOL p99 {hol:.0f} <= 32 x {hot} + 32 = {bound}: {ok(hol <= bound)}; "
          f"vs unlimited {hol_u:.0f}: {times} (target >= 10x): {ok(hol * 10 <= hol_u)}")
    p, p_u = med(b, 'probe_p99_us'), med(u, 'probe_p99_us')
    print(f"- {mode}, budget 32: probe p99 {p:.0f} us vs unlimited {p_u:.0f} us = {p / p_u:.2f}x (target <= 0.33x): {ok(3 * p <= p_u)}")
    t, t_u = med(b, 'hot_msgs_s'), med(u, 'hot_msgs_s')
    print(f"- {mode}, budget 32: hot throughput {t:.0f} vs {t_u:.0f} msgs/s = {t / t_u:.2f}x (target >= 0.90x): {ok(t >= 0.9 * t_u)}")
    print(f"- {mode}, budget 32: most frames one connection handed up in a round {top(b, 'max_round_frames')} (budget 32; unlimited: {top(u, 'max_round_frames')}); "
          f"most receive CQEs one connection consumed in one poller pass {top(b, 'max_conn_recvs_per_poll')} (poll batch {b[0]['poll_batch']}, window {b[0]['window']})")
PY
rm -rf "$OUT"
