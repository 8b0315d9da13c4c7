import json, sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    if line.startswith('{'):
        d = json.loads(line); rows.setdefault((d['mode'], d['budget']), []).append(d)
med = lambda rs, k: st.median(r[k] for r in rs)
top = lambda rs, k: max(r[k] for r in rs)
print("| poller | budget | probe calls/run | hot calls in flight | probe p50 ms | probe p99 ms | probe HOL p50 | probe HOL p99 | probe HOL max | hot msgs/s (min–max) | max recv CQEs / conn / poller pass | max frames / conn / round | srv CQEs / call | srv CPU % | cli CPU % | probe p99 vs unl. | HOL p99 vs unl. | hot tput vs unl. |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (mode, budget), rs in rows.items():
    u = rows[(mode, 'unlimited')]
    ratio = lambda k: f"{med(rs, k) / med(u, k):.2f}×" if med(u, k) else "—"
    lo, hi = min(r['hot_msgs_s'] for r in rs), max(r['hot_msgs_s'] for r in rs)
    print(f"| {mode} | {budget} | {med(rs,'probe_calls'):.0f} | {med(rs,'hot_in_flight'):.0f} | {med(rs,'probe_p50_us')/1000:.1f} | {med(rs,'probe_p99_us')/1000:.1f} | "
          f"{med(rs,'probe_hol_p50'):.0f} | {med(rs,'probe_hol_p99'):.0f} | {top(rs,'probe_hol_max')} | {med(rs,'hot_msgs_s'):.0f} ({lo}–{hi}) | "
          f"{top(rs,'max_conn_recvs_per_poll')} | {top(rs,'max_round_frames')} | {med(rs,'cqes_per_call'):.2f} | {med(rs,'server_cpu_pct'):.0f} | {med(rs,'client_cpu_pct'):.0f} | "
          f"{ratio('probe_p99_us')} | {ratio('probe_hol_p99')} | {ratio('hot_msgs_s')} |")
