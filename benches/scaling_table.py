#!/usr/bin/env python3
"""The scaling suite's table (benches/suites/scaling.sh): reads its raw output folder
(echo-nN.jsonl from benchctl --json-out, kv-SERVER-TEST-nN-rR.txt from redis-benchmark) and
prints QPS (median of rounds), per-shard efficiency QPS(n) / (n x QPS(1)), the ratio to the
peer (tokio-mt for echo, redis-server for KV), p99 and p99.9 in µs."""

import glob
import json
import os
import re
import statistics
import sys


def echo_rows(folder):
    """(bench, server, n) -> list of (qps, p99_us, p999_us)."""
    rows = {}
    for path in glob.glob(os.path.join(folder, "echo-n*.jsonl")):
        n = int(re.search(r"echo-n(\d+)\.jsonl$", path).group(1))
        for line in open(path):
            rec = json.loads(line).get("run", {})
            rep = rec.get("report")
            if not rep or rep.get("errors"):
                continue
            size = "4 KiB" if rec["workload"].endswith("4 KiB") else "64 B"
            key = (f"echo {size}", rec["variant"], n)
            rows.setdefault(key, []).append((rep["qps"], rep["p99_us"], rep["p999_us"]))
    return rows


def redis_benchmark(text):
    """(requests/s, p99 µs, p99.9 µs) from redis-benchmark's output, or None."""
    rps = re.search(r"throughput summary: ([0-9.]+) requests per second", text)
    if not rps:
        return None
    # The percentile table only: the cumulative table after it has coarser buckets.
    head = text.split("Cumulative distribution")[0]
    pct = [(float(p), float(ms)) for p, ms in
           re.findall(r"^\s*([0-9.]+)% <= ([0-9.]+) milliseconds", head, re.M)]

    def at(q):
        for p, ms in pct:
            if p >= q:
                return ms * 1000.0
        return float("nan")

    return float(rps.group(1)), at(99.0), at(99.9)


def kv_rows(folder):
    rows = {}
    for path in glob.glob(os.path.join(folder, "kv-*.txt")):
        m = re.search(r"kv-(.+)-(set|get)-n(\d+)-r\d+\.txt$", path)
        got = redis_benchmark(open(path).read())
        if got:
            key = (f"kv {m.group(2).upper()} -P 16", m.group(1), int(m.group(3)))
            rows.setdefault(key, []).append(got)
    return rows


PEER = {"echo": "tokio-mt", "kv": "redis-server"}
ORDER = {"corewire": 0, "tokio-mt": 1, "monoio-mt": 2, "corewire-kv": 0, "redis-server": 1}


def main():
    folder = sys.argv[1]
    rows = {**echo_rows(folder), **kv_rows(folder)}
    med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3))
           for k, v in rows.items()}
    print("| bench | server | shards | QPS | efficiency | QPS vs peer | p99 µs | p99.9 µs | rounds |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for key in sorted(med, key=lambda k: (k[0], k[2], ORDER.get(k[1], 9), k[1])):
        bench, server, n = key
        qps, p99, p999 = med[key]
        one = med.get((bench, server, 1))
        eff = f"{qps / (n * one[0]):.2f}" if one and one[0] else "-"
        peer = med.get((bench, PEER[bench.split()[0]], n))
        vs = f"{qps / peer[0]:.2f}" if peer and peer[0] else "-"
        print(f"| {bench} | {server} | {n} | {qps:.0f} | {eff} | {vs} | {p99:.1f} | "
              f"{p999:.1f} | {len(rows[key])} |")
    if not med:
        print("scaling_table.py: no measurement in", folder, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
