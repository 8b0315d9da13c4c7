#!/bin/bash
# How client-profile-4k.txt / server-profile-4k.txt were taken (helper-51, 2026-12-04).
# perf record --call-graph dwarf on one side for 1 s while the other side runs; 4 KiB x 64 x depth 4.
B=/tmp/h51A   # benchctl/loadgen/echo_server of /tmp/binA, rpc_corewire built at 71d51cb
side=${1:-client}
taskset -c 0 $B/rpc_corewire server --addr 127.0.0.1:20951 --shards 1 >/dev/null 2>&1 & SP=$!
sleep 0.5
taskset -c 1 $B/rpc_corewire client --addr 127.0.0.1:20951 --conns 64 --depth 4 --size 4096 \
    --duration-ms 2500 --warmup-ms 300 --threads 1 >/dev/null 2>&1 & CP=$!
sleep 1
[[ $side == client ]] && P=$CP || P=$SP
perf record --call-graph dwarf,16384 -F 2000 -o $side.data -p $P -- sleep 1
wait $CP; kill $SP; wait
perf report -i $side.data --children --sort sym --stdio --percent-limit 1 -g none
