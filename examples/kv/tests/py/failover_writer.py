"""redis-py's RedisCluster writing through a failover. Writes keys one after another,
retrying a write until it succeeds (so a dead primary's slots stall it, and the longest gap
between two successful writes is the outage a client saw); after each SET, `WAIT 1` on the
key's primary records whether a replica acknowledged it. Stops when STOP_FILE exists, then
reads back every acknowledged key.

Usage: failover_writer.py PORT STOP_FILE
Prints one line: `acked=N missing=M written=W failures=F longest_gap_s=S`."""
import os
import sys
import time

from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError

rc = RedisCluster(host="127.0.0.1", port=int(sys.argv[1]), cluster_error_retry_attempts=1)
stop_file = sys.argv[2]

acked = []
written = failures = 0
last_ok = time.monotonic()
longest = 0.0
i = 0
while not os.path.exists(stop_file):
    key = f"fw:{i}"
    try:
        rc.set(key, key)
        replicas = rc.execute_command("WAIT", 1, 200, target_nodes=rc.get_node_from_key(key))
    except (RedisError, RedisClusterException):
        # Connection refused by the killed primary, CLUSTERDOWN, MOVED storms while the
        # slot map settles, redis-py failing its own slot refresh: the same key again after
        # a pause, as an application would.
        failures += 1
        time.sleep(0.02)
        continue
    now = time.monotonic()
    longest = max(longest, now - last_ok)
    last_ok = now
    written += 1
    if replicas >= 1:
        acked.append(key)
    i += 1

missing = 0
for key in acked:
    for attempt in range(50):
        try:
            value = rc.get(key)
            break
        except (RedisError, RedisClusterException):
            time.sleep(0.1)
    else:
        value = None
    if value != key.encode():
        missing += 1
        print(f"lost {key}: {value!r}", file=sys.stderr)

print(f"acked={len(acked)} missing={missing} written={written} failures={failures} "
      f"longest_gap_s={longest:.3f}")
