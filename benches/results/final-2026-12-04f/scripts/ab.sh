#!/bin/bash
# A/B inside one VM boot: perftest vs old/new rdma_perf, interleaved rounds
set -u
SIZE=4096; ROUNDS=${ROUNDS:-5}; ITERS=2000; IP=10.77.0.1; DEV=rxe0; OUT=$(mktemp -d)
echo "# clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
perftest() { local name=$1; shift
  timeout 120 ib_send_lat -d $DEV -R -s $SIZE -n $ITERS "$@" > $OUT/srv.log 2>&1 & local sp=$!
  sleep 1
  for _ in 1 2 3 4 5 6 7 8; do timeout 120 ib_send_lat -d $DEV -R -s $SIZE -n $ITERS "$@" $IP > $OUT/cli.log 2>&1 && break; sleep 1; done
  wait $sp
  awk -v n="$name" -v s=$SIZE '$1==s && NF>=9 {printf "{\"row\":\"%s\",\"p50_us\":%.2f,\"avg_us\":%.2f}\n", n, 2*$5, 2*$6}' $OUT/cli.log; }
cw() { local name=$1 bin=$2; shift 2
  $bin --size $SIZE --duration-ms 2000 --warmup-ms 500 --idle-ms 300 "$@" 2>/dev/null | grep '^{' | sed "s/^{/{\"row\":\"$name\",/"; }
for r in $(seq 1 $ROUNDS); do
  perftest "perftest polling"
  perftest "perftest event" -e
  cw "old event" /tmp/vmp/rdma_perf.old --transport rdma --mode event
  cw "new event" /tmp/vmp/rdma_perf.new --transport rdma --mode event
  cw "old polling" /tmp/vmp/rdma_perf.old --transport rdma --mode polling
  cw "new polling" /tmp/vmp/rdma_perf.new --transport rdma --mode polling
done > $OUT/all.jsonl
python3 - $OUT/all.jsonl <<'PY'
import json,sys,statistics as st
rows={}
for l in open(sys.argv[1]):
    if l.startswith('{'): d=json.loads(l); rows.setdefault(d['row'],[]).append(d)
for n,rs in rows.items():
    print(f"{n:18s} n={len(rs)} p50={st.median(r['p50_us'] for r in rs):7.1f} avg={st.median(r['avg_us'] for r in rs):7.1f}  p50s={[round(r['p50_us']) for r in rs]}")
m=lambda n,k: st.median(r[k] for r in rows[n])
for v in ("old","new"):
    print(f"{v}: event/perftest-e p50 {m(v+' event','p50_us')/m('perftest event','p50_us'):.2f}x  polling/perftest p50 {m(v+' polling','p50_us')/m('perftest polling','p50_us'):.2f}x  event avg/polling avg {m(v+' event','avg_us')/m(v+' polling','avg_us'):.2f}x")
PY
