#!/usr/bin/env bash
# cg.sh LABEL BIN TEST(set|get) WHO(default|restricted|tls|plain) N
set -euo pipefail
label=$1 bin=$2 t=$3 who=$4 n=$5
out=/tmp/acltls/out; mkdir -p $out
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
f=$out/$label-$t-$who.cg
rm -f $f*
extra=() ; bport=$port; tlsb=()
if [[ $who == tls || $who == plain ]]; then
  w=/tmp/acltls/certs
  if [[ ! -f $w/server.crt ]]; then mkdir -p $w
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -keyout $w/ca.key -out $w/ca.crt -subj "/CN=bench CA" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $w/server.key -out $w/server.csr -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >$w/san.ext
    openssl x509 -req -in $w/server.csr -CA $w/ca.crt -CAkey $w/ca.key -CAcreateserial -days 2 -extfile $w/san.ext -out $w/server.crt 2>/dev/null
  fi
  tport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  extra=(--tls-port $tport --tls-cert-file $w/server.crt --tls-key-file $w/server.key --tls-ca-cert-file $w/ca.crt --tls-auth-clients no --tls-ciphersuites TLS_AES_128_GCM_SHA256)
  if [[ $who == tls ]]; then bport=$tport; tlsb=(--tls --cacert $w/ca.crt); fi
fi
if [[ $bin == redis ]]; then
  mkdir -p /tmp/acltls/rdir
  rextra=(); if [[ ${#extra[@]} -gt 0 ]]; then rextra=("${extra[@]:0:12}"); fi
  valgrind --tool=callgrind --callgrind-out-file=$f redis-server --port $port --save "" --appendonly no --dir /tmp/acltls/rdir "${rextra[@]}" >$out/vg-$label.log 2>&1 &
else
COREWIRE_BACKEND=epoll valgrind --tool=callgrind --callgrind-out-file=$f $bin --shards 1 --port $port "${extra[@]}" >$out/vg-$label.log 2>&1 &
fi
vpid=$!
for i in $(seq 1 300); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.2; done
auth=()
if [[ $who == restricted ]]; then
  redis-cli -p $port ACL SETUSER bench on '>bench' -@all +get +set +ping +config\|get '~counter:*' '~other:*' '~key:*' >/dev/null
  auth=(--user bench -a bench)
fi
run() { redis-benchmark -p $bport "${tlsb[@]}" "${auth[@]}" -t $t -n $1 -r 100000 -c 50 -P 16 -q >/dev/null 2>&1; }
run 20000
callgrind_control -z $vpid >/dev/null 2>&1
run $n
callgrind_control -d $vpid >/dev/null 2>&1
dump=$f.1
for _ in $(seq 1 50); do [[ -s $dump ]] && grep -q '^totals:' $dump && break; sleep 0.2; done
kill $vpid; wait $vpid 2>/dev/null || true
ir=$(grep -E '^summary:' $dump | awk '{print $2}')
printf "%-12s %-4s %-10s %8d Ir/req  (n %d, %s)\n" $label $t $who $((ir / n)) $n $dump
