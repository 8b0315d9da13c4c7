#!/bin/bash
# Full default redis-benchmark list, 5 rounds, helper paused while it runs.
cd /work/main
flock /tmp/bench.lock bash -c '
  /tmp/pause.sh STOP; uptime
  COREWIRE_KV=/tmp/kv-after examples/kv/bench/percore.sh --no-build --requests 100000 --requests-p16 1000000 --rounds 5 --mem-rounds 3 --mem-warmup
  /tmp/pause.sh CONT'
