#!/bin/bash
# The gateway beside nginx in front of one emulated worker (docs/gateway.md,
# "Beside nginx"): one colocated worker, `pdhybrid serve --mechanism pd-colo`
# and nginx (the OS package; `proxy_buffering off`) in front of it, then
# scripts/proxybench rotating direct / gateway / nginx round by round at each
# stream count. Everything on loopback; every process it starts is stopped.
#
#   scripts/proxybench.sh [OUTDIR] [proxybench flags...]
#
# Environment: TIME_SCALE (the worker's, default 1), NGINX (default: nginx
# on PATH, else /usr/sbin/nginx; `apt-get install -y nginx` if neither),
# PERF=1 to record the gateway's CPU profile with perf during the run
# (PERF_FREQ samples a second, default 499),
# GW_GOMAXPROCS and GW_GOGC for the gateway's Go runtime (default: Go's),
# GW_ARGS for more serve flags (`GW_ARGS="--relay direct"`), BIN_DIR for
# prebuilt pdhybrid and proxybench binaries (a machine without Go).
set -euo pipefail
out=${1:-proxybench-out}; shift || true
mkdir -p "$out"; out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[ -x "$NGINX" ] || { echo "proxybench: no nginx (apt-get install -y nginx)" >&2; exit 1; }
if [ -n "${BIN_DIR:-}" ]; then
  cp "$BIN_DIR/pdhybrid" "$BIN_DIR/proxybench" "$out/"
else
  go build -o "$out/pdhybrid" ./cmd/pdhybrid
  go build -o "$out/proxybench" ./scripts/proxybench
fi
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap stop EXIT
url_of() { # wait for a "listening url=" line in $1
  for _ in $(seq 200); do grep -q '^listening' "$1" 2>/dev/null && break; sleep 0.05; done
  grep -o 'url=[^ ]*' "$1" | head -1 | cut -d= -f2
}
"$out/pdhybrid" worker --role colo --port 0 --time-scale "${TIME_SCALE:-1}" --incremental-streaming-output > "$out/worker.out" 2> "$out/worker.err" &
pids+=($!)
W=$(url_of "$out/worker.out")
GOMAXPROCS=${GW_GOMAXPROCS:-} GOGC=${GW_GOGC:-} "$out/pdhybrid" serve --mechanism pd-colo --colo "$W" --port 0 --load-poll-interval 0 ${GW_ARGS:-} > "$out/gateway.out" 2> "$out/gateway.err" &
GW_PID=$!; pids+=($GW_PID)
G=$(url_of "$out/gateway.out")
NPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$out/nginx"
sed -e "s|@PORT@|$NPORT|" -e "s|@UPSTREAM@|${W#http://}|" -e "s|@DIR@|$out/nginx|" scripts/proxybench/nginx.conf.tmpl > "$out/nginx/nginx.conf"
env -u NGINX "$NGINX" -p "$out/nginx" -c "$out/nginx/nginx.conf" -e "$out/nginx/nginx-error.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$out/nginx/nginx.pid" ] && pgrep -P "$(cat "$out/nginx/nginx.pid")" >/dev/null && break; sleep 0.05; done
NG_PIDS=$(pgrep -d, -P "$(cat "$out/nginx/nginx.pid")")
echo "worker $W  gateway $G (pid $GW_PID)  nginx http://127.0.0.1:$NPORT (workers $NG_PIDS)  $(uptime)" | tee "$out/setup.txt"
if [ "${PERF:-0}" = 1 ]; then
  perf record -F "${PERF_FREQ:-499}" -g -p "$GW_PID" -o "$out/gateway.perf" > /dev/null 2>&1 &
  pids+=($!)
fi
"$out/proxybench" -direct "$W" -gateway "$G" -nginx "http://127.0.0.1:$NPORT" -time-scale "${TIME_SCALE:-1}" \
  -gateway-pids "$GW_PID" -nginx-pids "$NG_PIDS" -out "$out/proxybench.json" "$@" | tee "$out/proxybench.txt"
echo "after: $(uptime)" | tee -a "$out/setup.txt"
