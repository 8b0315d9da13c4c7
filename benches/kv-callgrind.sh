#!/usr/bin/env bash
# Server instructions per request of one redis-benchmark workload, counted with callgrind:
#
#   benches/kv-callgrind.sh LABEL BIN|redis TEST PIPE N [default|restricted|plain|tls]
#
# BIN is a corewire-kv binary (run with COREWIRE_BACKEND=epoll, since io_uring does not run
# under valgrind, and one shard); `redis` runs redis-server the same way. TEST is a
# redis-benchmark test (set, get, ...) or one of evalsha, xadd, xread, setbit, pfadd, geoadd, zunionstore (the workloads of
# examples/kv/bench/percore.sh).
# The last argument picks who sends the requests: the default user (default), a user
# restricted by command and key pattern (restricted, the rules of examples/kv/bench/acl.sh),
# or, with a TLS port configured beside the plaintext one, the plaintext port (plain) or the
# TLS port (tls: TLS 1.3, TLS_AES_128_GCM_SHA256, an ECDSA P-256 certificate made here). 20000 requests warm up,
# then the counters are zeroed, N requests run and are counted. CG_OPTS adds valgrind options
# (e.g. --cache-sim=yes). Prints instructions per
# request; the callgrind output stays under $OUT (default /tmp/kv-callgrind).
set -euo pipefail
label=$1 bin=$2 t=$3 p=$4 n=$5 who=${6:-default}
out=${OUT:-/tmp/kv-callgrind}
mkdir -p "$out/rdir"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
f=$out/$label-$t-P$p-$who.cg
rm -f "$f"*
tls=() bport=$port client_tls=()
if [[ $who == tls || $who == plain ]]; then
  w=$out/certs
  if [[ ! -f $w/server.crt ]]; then
    mkdir -p "$w"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -keyout "$w/ca.key" -out "$w/ca.crt" -subj "/CN=bench CA" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$w/server.key" -out "$w/server.csr" -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$w/san.ext"
    openssl x509 -req -in "$w/server.csr" -CA "$w/ca.crt" -CAkey "$w/ca.key" -CAcreateserial -days 2 -extfile "$w/san.ext" -out "$w/server.crt" 2>/dev/null
  fi
  tport=$(free_port)
  tls=(--tls-port "$tport" --tls-cert-file "$w/server.crt" --tls-key-file "$w/server.key" --tls-ca-cert-file "$w/ca.crt" --tls-auth-clients no --tls-ciphersuites TLS_AES_128_GCM_SHA256)
  if [[ $who == tls ]]; then bport=$tport; client_tls=(--tls --cacert "$w/ca.crt"); fi
fi
if [[ $bin == redis ]]; then
  valgrind --tool=callgrind ${CG_OPTS:-} --callgrind-out-file="$f" redis-server --port "$port" --save "" --appendonly no --dir "$out/rdir" "${tls[@]}" >"$out/vg-$label.log" 2>&1 &
else
  COREWIRE_BACKEND=epoll valgrind --tool=callgrind ${CG_OPTS:-} --callgrind-out-file="$f" "$bin" --shards 1 --port "$port" "${tls[@]}" >"$out/vg-$label.log" 2>&1 &
fi
vpid=$!
for _ in $(seq 1 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
auth=()
if [[ $who == restricted ]]; then
  redis-cli -p "$port" ACL SETUSER bench on '>bench' -@all +get +set +ping +config\|get '~counter:*' '~other:*' '~key:*' >/dev/null
  auth=(--user bench -a bench)
fi
script="redis.call('incr', KEYS[1]) redis.call('incr', KEYS[1]) return redis.call('get', KEYS[1])"
[[ $t == xread ]] && for i in $(seq 1 100); do echo "XADD bench:x * field value$i"; done | redis-cli -p "$port" >/dev/null
# Two 100-member sorted sets, half their members shared.
[[ $t == zunionstore ]] && for i in $(seq 1 100); do echo "ZADD bench:z1 $i m$i"; echo "ZADD bench:z2 $((i * 2)) m$((i + 50))"; done | redis-cli -p "$port" >/dev/null
set -f
case $t in
  evalsha) cmd="EVALSHA $(redis-cli -p "$port" script load "$script") 1 bench:eval:__rand_int__" ;;
  xadd) cmd="XADD bench:xs * field value" ;;
  xread) cmd="XREAD COUNT 10 STREAMS bench:x 0" ;;
  setbit) cmd="SETBIT bench:bits:__rand_int__ 7 1" ;;
  pfadd) cmd="PFADD bench:hll e:__rand_int__" ;;
  geoadd) cmd="GEOADD bench:geo 13.361389 38.115556 m:__rand_int__" ;;
  zunionstore) cmd="ZUNIONSTORE bench:zu 2 bench:z1 bench:z2" ;;
  *) cmd="" ;;
esac
run() {
  local what=(-t "$t")
  # shellcheck disable=SC2206 # the command's words, split as redis-benchmark takes them
  [[ -n $cmd ]] && what=($cmd)
  redis-benchmark -p "$bport" "${client_tls[@]}" "${auth[@]}" -n "$1" -r 100000 -c 50 -P "$p" -q "${what[@]}" >/dev/null 2>&1
}
run 20000
callgrind_control -z $vpid >/dev/null 2>&1
run "$n"
callgrind_control -d $vpid >/dev/null 2>&1
dump=$f.1
for _ in $(seq 1 50); do [[ -s $dump ]] && grep -q '^totals:' "$dump" && break; sleep 0.2; done
kill $vpid; wait $vpid 2>/dev/null || true
ir=$(grep -E '^summary:' "$dump" | awk '{print $2}')
printf "%-12s %-8s P%-3s %-10s %8d Ir/req  (n %d, %s)\n" "$label" "$t" "$p" "$who" $((ir / n)) "$n" "$dump"
