#!/bin/bash
set -u
SIZE=4096; ROUNDS=${ROUNDS:-4}; ITERS=2000; IP=10.77.0.1; DEV=rxe0; OUT=$(mktemp -d); B=/tmp/vmp/rdma_perf.new
perftest() { local name=$1; shift
  timeout 120 ib_send_lat -d $DEV -R -s $SIZE -n $ITERS "$@" > $OUT/srv.log 2>&1 & local sp=$!
  sleep 1
  for _ in 1 2 3 4 5 6 7 8; do timeout 120 ib_send_lat -d $DEV -R -s $SIZE -n $ITERS "$@" $IP > $OUT/cli.log 2>&1 && break; sleep 1; done
  wait $sp
  awk -v n="$name" -v s=$SIZE '$1==s && NF>=9 {printf "{\"row\":\"%s\",\"p50_us\":%.2f,\"avg_us\":%.2f}\n", n, 2*$5, 2*$6}' $OUT/cli.log; }
cw() { local name=$1; shift
  env "$@" --size $SIZE --duration-ms 2000 --warmup-ms 500 --idle-ms 300 2>/dev/null | grep '^{' | sed "s/^{/{\"row\":\"$name\",/"; }
for r in $(seq 1 $ROUNDS); do
  perftest "perftest event" -e
  cw "event spin0" $B --transport rdma --mode event --spin-us 0
  cw "event spin50" $B --transport rdma --mode event
  cw "event spin500" $B --transport rdma --mode event --spin-us 500
  cw "event coop" COREWIRE_IO_URING=coop $B --transport rdma --mode event
  cw "event plain" COREWIRE_IO_URING=plain $B --transport rdma --mode event
  cw "polling" $B --transport rdma --mode polling
done > $OUT/all.jsonl
python3 - $OUT/all.jsonl <<'PY'
import json,sys,statistics as st
rows={}
for l in open(sys.argv[1]):
    if l.startswith('{'): d=json.loads(l); rows.setdefault(d['row'],[]).append(d)
pe=st.median(r['p50_us'] for r in rows['perftest event'])
for n,rs in rows.items():
    p=st.median(r['p50_us'] for r in rs)
    print(f"{n:18s} n={len(rs)} p50={p:7.1f} ({p/pe:.2f}x) avg={st.median(r['avg_us'] for r in rs):7.1f} srvcpu={st.median(r.get('server_cpu_pct',0) for r in rs):.0f} p50s={[round(r['p50_us']) for r in rs]}")
PY
strace -f -c -o /tmp/st.c $B --transport rdma --mode event --size 4096 --duration-ms 3000 --warmup-ms 200 --idle-ms 100 2>/dev/null | grep '^{' | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('requests', d['requests'])"
head -14 /tmp/st.c
