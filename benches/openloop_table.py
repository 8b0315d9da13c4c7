#!/usr/bin/env python3
"""The open-loop suite's table (benches/suites/openloop.sh): reads its JSON lines (one per
measurement: bench, server, round, load_pct, report) and prints medians over rounds of the
achieved QPS and p50/p99/p99.9 from intended send times, with p99.9 as a ratio to the peer
(tokio-ct for echo and RPC, redis-server for KV) at the same load."""

import json
import statistics
import sys

PEER = {"echo": "tokio-ct", "kv": "redis-server", "rpc": "tokio-ct"}
KEYS = ("target_rate", "qps", "p50_us", "p99_us", "p999_us", "unanswered", "errors")


def main():
    cells = {}
    for line in open(sys.argv[1]):
        rec = json.loads(line)
        rep = rec.get("report")
        if not rep:
            continue
        key = (rec["bench"], rec["server"], rec["load_pct"])
        cells.setdefault(key, []).append(rep)
    med = {k: {f: statistics.median(r.get(f, 0) for r in v) for f in KEYS}
           for k, v in cells.items()}
    print("| bench | server | load | target req/s | achieved req/s | p50 µs | p99 µs | p99.9 µs "
          "| p99.9 vs peer | unanswered | errors | rounds |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for key in sorted(med, key=lambda k: (k[0], k[2], k[1] == PEER[k[0]], k[1])):
        bench, server, pct = key
        m = med[key]
        peer = med.get((bench, PEER[bench], pct))
        vs = f"{m['p999_us'] / peer['p999_us']:.2f}" if peer and peer["p999_us"] else "-"
        load = "max (closed loop)" if pct == 100 else f"{pct} %"
        target = "-" if pct == 100 else f"{m['target_rate']:.0f}"
        print(f"| {bench} | {server} | {load} | {target} | {m['qps']:.0f} | {m['p50_us']:.1f} | "
              f"{m['p99_us']:.1f} | {m['p999_us']:.1f} | {vs} | {m['unanswered']:.0f} | "
              f"{m['errors']:.0f} | {len(cells[key])} |")
    if not med:
        print("openloop_table.py: no measurement in", sys.argv[1], file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
