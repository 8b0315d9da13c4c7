"""redis-py's RedisCluster against a corewire-kv cluster: 100k keys written and read back
across the nodes, plus the single-key and hash-tag paths. Usage: cluster_100k.py PORT"""
import sys

from redis.cluster import RedisCluster

KEYS = 100_000
BATCH = 2_000

rc = RedisCluster(host="127.0.0.1", port=int(sys.argv[1]))
nodes = rc.get_primaries()
assert len(nodes) == 3, nodes

for start in range(0, KEYS, BATCH):
    pipe = rc.pipeline()
    for i in range(start, min(start + BATCH, KEYS)):
        pipe.set(f"py:{i}", f"v{i}")
    assert all(pipe.execute()), f"SET batch at {start}"

for start in range(0, KEYS, BATCH):
    pipe = rc.pipeline()
    for i in range(start, min(start + BATCH, KEYS)):
        pipe.get(f"py:{i}")
    values = pipe.execute()
    for i, value in zip(range(start, start + BATCH), values):
        assert value == f"v{i}".encode(), (i, value)

# Spread over every node, and nothing else there.
per_node = [rc.dbsize(target_nodes=node) for node in nodes]
assert sum(per_node) == KEYS, per_node
assert all(count > KEYS // 5 for count in per_node), per_node

# One key at a time, and keys kept together by a hash tag.
assert rc.set("py:single", "1") and rc.incr("py:single") == 2
assert rc.mset_nonatomic({"{py}a": "1", "{py}b": "2"})
assert rc.mget_nonatomic(["{py}a", "{py}b"]) == [b"1", b"2"]
assert rc.keyslot("{py}a") == rc.keyslot("{py}b")
assert rc.delete("{py}a", "{py}b") == 2

print(f"OK {KEYS} keys, per node {per_node}")
