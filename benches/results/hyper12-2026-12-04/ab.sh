#!/bin/bash
# ab.sh ROUNDS SECS name=cmd-with-PORT ... (PORT substituted)
set -uo pipefail
R=$1 S=$2; shift 2
tick=$(getconf CLK_TCK); out=$(mktemp -d); port=18090
run_one() { local name=$1 cmd=${2//PORT/$port}; port=$((port+1))
  taskset -c 0 $cmd >/dev/null 2>&1 & local pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$((port-1))/" >/dev/null && break; sleep 0.05; done
  read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  taskset -c 1 /usr/bin/time -f '%e %U %S' -o $out/wt wrk -t1 -c64 -d${S}s http://127.0.0.1:$((port-1))/ > $out/wrk
  read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  kill $pid; wait $pid 2>/dev/null
  reqs=$(awk '/requests in/ {print $1}' $out/wrk); rps=$(awk '/Requests\/sec/ {print $2}' $out/wrk)
  read -r wall wu ws < $out/wt
  awk -v n=$name -v rps=$rps -v reqs=$reqs -v u=$((u1-u0)) -v s=$((s1-s0)) -v t=$tick -v wall=$wall -v wu=$wu -v ws=$ws 'BEGIN{printf "%-8s %9.0f req/s user %.2f sys %.2f us/req srv %3.0f%% wrk %3.0f%% wrk %.2f us/req\n", n, rps, u/t/reqs*1e6, s/t/reqs*1e6, (u+s)/t/wall*100, (wu+ws)/wall*100, (wu+ws)/reqs*1e6}' | tee -a $out/all
}
for r in $(seq $R); do for spec in "$@"; do run_one "${spec%%=*}" "${spec#*=}"; done; done
for spec in "$@"; do n=${spec%%=*}; awk -v n=$n '$1==n{print $2}' $out/all | sort -n | awk -v n=$n '{v[NR]=$1} END{printf "median %s %.0f\n", n, (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; done
rm -rf $out
