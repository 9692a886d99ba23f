#!/usr/bin/env bash
# Three `warmstart serve` replicas sharing checkpoints through one Redis, behind HAProxy
# routing by prompt_cache_key (deploy/haproxy.cfg). Debian 12: apt-get install
# redis-server haproxy (scripts/install-deps.sh does). Runs until interrupted, then stops
# everything it started.
#
# usage: deploy/replicas.sh [-m MODEL.gguf] [-p PORT] [-s STATE_DIR] [-b WARMSTART] [-- SERVE_FLAGS...]
#   PORT        HAProxy listens on PORT (default 8080); replicas on PORT+1..3, Redis on PORT+10
#   STATE_DIR   logs (*.log), process ids (*.pid) and Redis's password (default: a new
#               temporary folder, printed). A file STATE_DIR/ready appears once all is up.
#   SERVE_FLAGS passed to every replica (e.g. -t 2 --parallel 2)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model="" port=8080 state="" bin="$root/build/warmstart"
while getopts "m:p:s:b:" o; do
  case $o in
    m) model=$OPTARG ;; p) port=$OPTARG ;; s) state=$OPTARG ;; b) bin=$OPTARG ;;
    *) sed -n 2,13p "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
for tool in redis-server haproxy "$bin"; do
  command -v "$tool" >/dev/null || { echo "replicas.sh: $tool not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
[ -n "$state" ] || state=$(mktemp -d /tmp/warmstart-replicas-XXXXXX)
mkdir -p "$state"
rm -f "$state/ready"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# Redis: loopback only, a password (replicas read it from WARMSTART_REDIS_PASSWORD, so it
# stays out of the process list), no persistence (a cache), least recently used keys go
# when full.
password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
echo "$password" > "$state/redis.password"
redis_port=$((port + 10))
cat > "$state/redis.conf" <<CONF
port $redis_port
bind 127.0.0.1
requirepass $password
save ""
appendonly no
maxmemory 1gb
maxmemory-policy allkeys-lru
dir $state
logfile $state/redis.log
CONF
redis-server "$state/redis.conf" &
pids+=($!)
echo $! > "$state/redis.pid"

model_flags=()
[ -n "$model" ] && model_flags=(-m "$model")
for i in 1 2 3; do
  WARMSTART_REDIS_PASSWORD=$password "$bin" serve "${model_flags[@]}" --port $((port + i)) \
    --cache-redis 127.0.0.1:$redis_port "$@" > "$state/replica$i.log" 2>&1 &
  pids+=($!)
  echo $! > "$state/replica$i.pid"
done
for i in 1 2 3; do
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$((port + i))/health" >/dev/null && break
    kill -0 "$(cat "$state/replica$i.pid")" 2>/dev/null || { echo "replicas.sh: replica $i exited:" >&2; tail -5 "$state/replica$i.log" >&2; exit 1; }
    sleep 0.1
  done
done

WS_PROXY_BIND=127.0.0.1:$port WS_REPLICA_1=127.0.0.1:$((port + 1)) WS_REPLICA_2=127.0.0.1:$((port + 2)) \
  WS_REPLICA_3=127.0.0.1:$((port + 3)) haproxy -W -db -f "$root/deploy/haproxy.cfg" > "$state/haproxy.log" 2>&1 &
pids+=($!)
echo $! > "$state/haproxy.pid"
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
echo "replicas.sh: http://127.0.0.1:$port (replicas on $((port + 1))-$((port + 3)), Redis on $redis_port; state in $state)"
touch "$state/ready"
wait
