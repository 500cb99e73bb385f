#!/bin/bash
# fault run: 1P3D KVC, 2 replicas, closed-loop replay; kills on a schedule
cd "${1:-.}"
# KVC_PRESET: the gateways' --kvc-preset; v2 by default, as the run in docs/gateway.md was measured
pdhybrid up --mechanism kvcache-centric --kvc-preset "${KVC_PRESET:-v2}" --prefill 1 --decode 3 --gateways 2 --port 0 --time-scale 20 \
  --trace t.jsonl --out run --request-timeout 30 > up.out 2> up.err &
UP=$!
for i in $(seq 100); do grep -q "^listening" up.out && break; sleep 0.1; done
T0=$(date +%s.%N)
pid() { grep "$1" up.out | sed -n "$2p" | grep -o 'pid=[0-9]*' | cut -d= -f2; }
D0=$(pid "role=decode" 1); D1=$(pid "role=decode" 2); P=$(pid "role=prefill" 1); G0=$(pid "^gateway" 1)
ev() { echo "$(echo "$(date +%s.%N) - $T0" | bc) $1" >> events.txt; }
sleep 8;  ev "kill -9 decode-0"; kill -9 $D0
sleep 12; ev "kill -9 prefill-0"; kill -9 $P
sleep 12; ev "kill -9 gateway-0"; kill -9 $G0
sleep 12; ev "SIGSTOP decode-1"; kill -STOP $D1
sleep 10; ev "SIGCONT decode-1"; kill -CONT $D1
wait $UP; echo "up exit $?" >> events.txt
