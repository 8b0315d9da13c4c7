#!/usr/bin/env python3
"""The measuring side of replication.sh: one probe per call, one JSON line on stdout.

    repl_probe.py gen N                   RESP for N `SET key:%012d <32 B>` on stdout
    repl_probe.py save PORT PID N RDB [RATE]
                                          BGSAVE on a server holding N keys (to file RDB):
                                          wall time, the server's RSS (and a fork child's
                                          private memory) during it, GET latency before and
                                          during it (GETs back to back, or RATE a second)
    repl_probe.py quiet-save PORT RDB     BGSAVE with no other client (INFO polled every
                                          5 ms): wall time, RDB size
    repl_probe.py sync PORT PID N -- CMD  starts replica CMD (its port is after --port) and
                                          times it until its link is up and it holds N keys
    repl_probe.py lag PORT PID N -- CMD -- LOAD
                                          a synced replica CMD, then LOAD (a redis-benchmark
                                          command) on the master: the replica's offset lag
                                          sampled every 50 ms, in bytes and in time
    repl_probe.py table DIR               the markdown table of the JSON lines in
                                          DIR/{save,sync,lag}.{corewire-kv,redis-server}.*

A plain-socket RESP client (no redis-py needed). GETs are sent at depth 1 from one
connection; the figures include this client's own time (about the same for both servers).
"""

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time

VALUE = b"v" * 32


def key(i):
    return b"key:%012d" % i


class Conn:
    def __init__(self, port, timeout=60.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self.read()

    def read(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("server closed the connection")
        kind, body = line[:1], line[1:-2]
        if kind == b"+":
            return body.decode()
        if kind == b"-":
            raise RuntimeError(body.decode())
        if kind == b":":
            return int(body)
        if kind == b"$":
            n = int(body)
            if n < 0:
                return None
            return self.f.read(n + 2)[:-2]
        if kind == b"*":
            n = int(body)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ValueError(f"unexpected reply {line!r}")

    def info(self, section):
        text = self.call("INFO", section).decode()
        return dict(
            line.split(":", 1) for line in text.split("\r\n") if ":" in line and not line.startswith("#")
        )

    def close(self):
        self.s.close()


def connect_when_up(port, deadline_s=60.0):
    end = time.monotonic() + deadline_s
    while True:
        try:
            return Conn(port)
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.005)


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def private_kib(pid):
    """Pages only this process maps (a fork child's copies and its own allocations)."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1])
    except OSError:
        pass
    return total


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    at = min(len(sorted_values) - 1, int(round(p / 100.0 * (len(sorted_values) - 1))))
    return sorted_values[at]


def latency_summary(lat_s):
    lat = sorted(x * 1e6 for x in lat_s)
    return {
        "gets": len(lat),
        "p50_us": round(percentile(lat, 50), 1),
        "p99_us": round(percentile(lat, 99), 1),
        "p999_us": round(percentile(lat, 99.9), 1),
        "max_us": round(lat[-1], 1) if lat else 0.0,
    }


def gen(n):
    out = sys.stdout.buffer
    batch = []
    for i in range(n):
        batch.append(b"*3\r\n$3\r\nSET\r\n$16\r\n%s\r\n$32\r\n%s\r\n" % (key(i), VALUE))
        if len(batch) == 4096:
            out.write(b"".join(batch))
            batch.clear()
    out.write(b"".join(batch))
    out.flush()


def timed_gets(conn, n_keys, seconds):
    lat = []
    end = time.perf_counter() + seconds
    while True:
        t = time.perf_counter()
        if t >= end:
            return lat
        conn.call("GET", key(random.randrange(n_keys)))
        lat.append(time.perf_counter() - t)


def save(port, pid, n_keys, rdb_path, rate=0.0):
    """`rate` > 0: GETs during the save at most that many per second (an open loop, so
    servers that answer faster do not get more GETs to answer); 0: back to back."""
    ctl, data = Conn(port), Conn(port)
    before = latency_summary(timed_gets(data, n_keys, 1.0))
    rss0 = rss_kib(pid)
    peak, child_peak = rss0, 0
    lat = []
    t0 = time.perf_counter()
    reply = ctl.call("BGSAVE")
    next_poll = next_child = next_get = t0
    while True:
        if rate > 0:
            next_get += 1.0 / rate
            pause = next_get - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
        t = time.perf_counter()
        data.call("GET", key(random.randrange(n_keys)))
        now = time.perf_counter()
        lat.append(now - t)
        if now >= next_poll:
            next_poll = now + 0.02
            peak = max(peak, rss_kib(pid))
            if now >= next_child:
                next_child = now + 0.1
                child_peak = max([child_peak] + [private_kib(c) for c in children(pid)])
            persistence = ctl.info("persistence")
            if persistence.get("rdb_bgsave_in_progress") == "0":
                wall = time.perf_counter() - t0
                status = persistence.get("rdb_last_bgsave_status")
                break
    during = latency_summary(lat)
    print(
        json.dumps(
            {
                "reply": reply,
                "status": status,
                "wall_s": round(wall, 3),
                "rss0_kib": rss0,
                "rss_peak_kib": peak,
                "child_private_peak_kib": child_peak,
                "cow_kib": int(persistence.get("rdb_last_cow_size", "0")) // 1024,
                "rdb_bytes": os.path.getsize(rdb_path) if os.path.exists(rdb_path) else 0,
                "before": before,
                "during": during,
                # corewire-kv only: how its walk shared the shard (holds, waits behind them).
                "walk": walk_figures(persistence.get("rdb_last_save_walk")),
            }
        )
    )


def quiet_save(port, rdb_path):
    ctl = Conn(port)
    t0 = time.perf_counter()
    reply = ctl.call("BGSAVE")
    while True:
        time.sleep(0.005)
        persistence = ctl.info("persistence")
        if persistence.get("rdb_bgsave_in_progress") == "0":
            break
    wall = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "reply": reply,
                "status": persistence.get("rdb_last_bgsave_status"),
                "wall_s": round(wall, 3),
                "rdb_bytes": os.path.getsize(rdb_path) if os.path.exists(rdb_path) else 0,
                "walk": walk_figures(persistence.get("rdb_last_save_walk")),
            }
        )
    )


def walk_figures(text):
    """INFO's `rdb_last_save_walk:holds=N,hold_p99_us=N,...` as a dict (None if absent)."""
    if not text:
        return None
    return {k: int(v) for k, v in (kv.split("=") for kv in text.split(","))}


def replica_port(cmd):
    return int(cmd[cmd.index("--port") + 1])


def start_replica(cmd):
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_synced(master_pid, rport, n_keys, peak_box, limit_s=600.0):
    """Until the replica's link is up and it holds n_keys: (link up s, keys equal s)."""
    t0 = time.perf_counter()
    r = connect_when_up(rport)
    link_up = None
    while True:
        now = time.perf_counter()
        if now - t0 > limit_s:
            raise TimeoutError(f"replica not synced after {limit_s} s")
        peak_box[0] = max(peak_box[0], rss_kib(master_pid))
        try:
            if link_up is None:
                if r.info("replication").get("master_link_status") == "up":
                    link_up = now - t0
            if link_up is not None and r.call("DBSIZE") == n_keys:
                return r, link_up, now - t0
        except RuntimeError:
            pass  # -LOADING while the replica loads the RDB
        time.sleep(0.01)


def spot_check(m, r, n_keys, count=1000):
    for _ in range(count):
        k = key(random.randrange(n_keys))
        if m.call("GET", k) != r.call("GET", k):
            return False
    return True


def stop(proc, cmd):
    proc.terminate()
    proc.wait()
    d = cmd[cmd.index("--dir") + 1] if "--dir" in cmd else None
    if d:
        shutil.rmtree(d, ignore_errors=True)


def sync(port, pid, n_keys, cmd):
    rss0 = rss_kib(pid)
    peak = [rss0]
    proc = start_replica(cmd)
    try:
        r, link_up, equal = wait_synced(pid, replica_port(cmd), n_keys, peak)
        m = Conn(port)
        same = spot_check(m, r, n_keys)
    finally:
        stop(proc, cmd)
    print(
        json.dumps(
            {
                "link_up_s": round(link_up, 3),
                "keys_equal_s": round(equal, 3),
                "spot_check": same,
                "master_rss0_kib": rss0,
                "master_rss_peak_kib": peak[0],
            }
        )
    )


def lag(port, pid, n_keys, cmd, load):
    proc = start_replica(cmd)
    try:
        r, _, _ = wait_synced(pid, replica_port(cmd), n_keys, [0])
        m = Conn(port)
        master_samples, replica_samples = [], []

        def sample():
            t = time.perf_counter()
            mo = int(m.info("replication")["master_repl_offset"])
            ro = int(r.info("replication")["slave_repl_offset"])
            master_samples.append((t, mo))
            replica_samples.append((time.perf_counter(), ro))
            return mo, ro

        sample()
        bench = subprocess.Popen(load, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        t_load = time.perf_counter()
        while bench.poll() is None:
            sample()
            time.sleep(0.05)
        t_end = time.perf_counter()
        load_out = bench.stdout.read().decode(errors="replace").strip().splitlines()
        catch_up = None
        while time.perf_counter() - t_end < 60:
            mo, ro = sample()
            if ro >= mo:
                catch_up = time.perf_counter() - t_end
                break
            time.sleep(0.01)
        same = spot_check(m, r, n_keys) if catch_up is not None else False
    finally:
        stop(proc, cmd)
    # The replica's lag in time: 0 when it had what the master reported just before;
    # otherwise how long before its sample the master's offset first reached what the
    # replica had applied (linear between the master's samples).
    during = [
        (t, mo, ro)
        for (_, mo), (t, ro) in zip(master_samples, replica_samples)
        if t_load <= t <= t_end
    ]
    lag_bytes = sorted(max(0, mo - ro) for _, mo, ro in during)
    lag_ms = []
    for t, mo, ro in during:
        if ro >= mo:
            lag_ms.append(0.0)
            continue
        for (t1, m1), (t2, m2) in zip(master_samples, master_samples[1:]):
            if m2 >= ro:
                at = t1 if m2 == m1 else t1 + (t2 - t1) * max(0, ro - m1) / (m2 - m1)
                lag_ms.append(max(0.0, (t - at) * 1000))
                break
    lag_ms.sort()
    first, last = master_samples[0], [s for s in master_samples if s[0] <= t_end][-1]
    print(
        json.dumps(
            {
                "load_s": round(t_end - t_load, 3),
                "load_summary": load_out[-1] if load_out else "",
                "stream_mb_s": round((last[1] - first[1]) / max(1e-9, last[0] - first[0]) / 1e6, 2),
                "samples": len(lag_bytes),
                "lag_bytes_p50": percentile(lag_bytes, 50),
                "lag_bytes_max": lag_bytes[-1] if lag_bytes else 0,
                "lag_ms_p50": round(percentile(lag_ms, 50), 1),
                "lag_ms_p99": round(percentile(lag_ms, 99), 1),
                "lag_ms_max": round(lag_ms[-1], 1) if lag_ms else 0.0,
                "catch_up_s": None if catch_up is None else round(catch_up, 3),
                "spot_check": same,
            }
        )
    )


SERVERS = ("corewire-kv", "redis-server")


def table(work):
    """Medians over the rounds, corewire-kv's ratio to redis-server's."""
    import glob
    import statistics

    def runs(part, name):
        out = []
        for path in sorted(glob.glob(os.path.join(work, f"{part}.{name}.*"))):
            with open(path) as f:
                text = f.read().strip()
            if text:
                out.append(json.loads(text.splitlines()[-1]))
        return out

    rows = []

    def row(label, part, fn, fmt="{:.2f}"):
        values = []
        for name in SERVERS:
            xs = [fn(r) for r in runs(part, name)]
            xs = [x for x in xs if x is not None]
            values.append(statistics.median(xs) if xs else None)
        cells = [fmt.format(v) if v is not None else "-" for v in values]
        a, b = values
        ratio = f"{a / b:.2f}" if a is not None and b else "-"
        n = len(runs(part, SERVERS[0]))
        rows.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio} | {n} |")

    mib = 1.0 / 1024
    row("BGSAVE: wall time (s)", "save", lambda r: r["wall_s"] if r["status"] == "ok" else None, "{:.2f}")
    row("BGSAVE: RDB written (MB/s)", "save", lambda r: r["rdb_bytes"] / 1e6 / r["wall_s"], "{:.0f}")
    row("BGSAVE: RDB size (MiB)", "save", lambda r: r["rdb_bytes"] / 2**20, "{:.0f}")
    row("BGSAVE: server RSS before (MiB)", "save", lambda r: r["rss0_kib"] * mib, "{:.0f}")
    row(
        "BGSAVE: memory added during the save (MiB; RSS peak - before, + a fork child's private pages)",
        "save",
        lambda r: (r["rss_peak_kib"] - r["rss0_kib"] + r["child_private_peak_kib"]) * mib,
        "{:.1f}",
    )
    row("GET p50 before the save (us)", "save", lambda r: r["before"]["p50_us"], "{:.0f}")
    row("GET p99 before the save (us)", "save", lambda r: r["before"]["p99_us"], "{:.0f}")
    row("GET p50 during the save (us)", "save", lambda r: r["during"]["p50_us"], "{:.0f}")
    row("GET p99 during the save (us)", "save", lambda r: r["during"]["p99_us"], "{:.0f}")
    row("GET p99.9 during the save (us)", "save", lambda r: r["during"]["p999_us"], "{:.0f}")
    row("GET max during the save (us)", "save", lambda r: r["during"]["max_us"], "{:.0f}")
    row("GETs answered during the save", "save", lambda r: r["during"]["gets"], "{:.0f}")
    walk = lambda f: lambda r: (r.get("walk") or {}).get(f)  # noqa: E731
    row("BGSAVE walk: longest hold of the shard (us)", "save", walk("hold_max_us"), "{:.0f}")
    row("BGSAVE walk: work waiting behind a hold, p50 (us)", "save", walk("wait_p50_us"), "{:.0f}")
    row("BGSAVE walk: work waiting behind a hold, p99 (us)", "save", walk("wait_p99_us"), "{:.0f}")
    row("full sync to a redis-server replica: link up (s)", "sync", lambda r: r["link_up_s"])
    row("full sync: replica holds every key (s)", "sync", lambda r: r["keys_equal_s"] if r["spot_check"] else None)
    row(
        "full sync: master memory added (MiB, RSS peak - before)",
        "sync",
        lambda r: (r["master_rss_peak_kib"] - r["master_rss0_kib"]) * mib,
        "{:.1f}",
    )
    row("SET load on the master: stream (MB/s of offset)", "lag", lambda r: r["stream_mb_s"])
    row("replica lag during the load, p50 (bytes)", "lag", lambda r: r["lag_bytes_p50"], "{:.0f}")
    row("replica lag during the load, max (bytes)", "lag", lambda r: r["lag_bytes_max"], "{:.0f}")
    row("replica lag during the load, p50 (ms)", "lag", lambda r: r["lag_ms_p50"], "{:.1f}")
    row("replica lag during the load, p99 (ms)", "lag", lambda r: r["lag_ms_p99"], "{:.1f}")
    row("replica lag during the load, max (ms)", "lag", lambda r: r["lag_ms_max"], "{:.1f}")
    row(
        "replica caught up after the load (s)",
        "lag",
        lambda r: r["catch_up_s"] if r["spot_check"] else None,
        "{:.3f}",
    )
    print("| figure (median of rounds) | corewire-kv | redis-server | ratio | rounds |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    for name in SERVERS:
        loads = [r["load_summary"] for r in runs("lag", name)]
        if loads:
            print(f"\n{name} under the SET load: " + "; ".join(loads))


def main(argv):
    mode = argv[1]
    if mode == "gen":
        return gen(int(argv[2]))
    if mode == "table":
        return table(argv[2])
    if mode == "quiet-save":
        return quiet_save(int(argv[2]), argv[3])
    port, pid, n_keys = int(argv[2]), int(argv[3]), int(argv[4])
    rest = argv[5:]
    if mode == "save":
        return save(port, pid, n_keys, rest[0], float(rest[1]) if len(rest) > 1 else 0.0)
    if rest[:1] != ["--"]:
        sys.exit(f"repl_probe.py {mode}: expected -- REPLICA COMMAND")
    rest = rest[1:]
    if mode == "sync":
        return sync(port, pid, n_keys, rest)
    if mode == "lag":
        split = rest.index("--")
        return lag(port, pid, n_keys, rest[:split], rest[split + 1 :])
    sys.exit(f"repl_probe.py: unknown mode {mode}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main(sys.argv)
