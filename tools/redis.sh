#!/usr/bin/env bash
# Makes sure a Redis server answers for the worker's queue tests, at REDIS_URL
# (default redis://127.0.0.1:6379). On Debian as root, installs Debian's redis-server with
# apt-get when it is missing and starts it in the background, bound to 127.0.0.1, without
# persistence; elsewhere says what to do. Idempotent: returns at once when PING answers.
#
# `tools/redis.sh sentinel` instead starts, on side ports, a Redis master (127.0.0.1:6391) and a
# real Redis Sentinel (127.0.0.1:26391, redis-server --sentinel, as Debian's redis-sentinel runs
# it) monitoring it as master group `berth`; the worker reaches it with VELA_QUEUE_CLUSTER=true
# and VELA_QUEUE_ADDR=redis://[berth,127.0.0.1:26391]. Idempotent too.
set -euo pipefail
say() { printf '[redis] %s\n' "$*"; }

if [ "${1:-}" = sentinel ]; then
  mport=6391
  sport=26391
  resp() { # host port command… → first reply line (RESP over /dev/tcp; no redis-cli needed)
    local h=$1 p=$2
    shift 2
    timeout 2 bash -c "exec 3<>/dev/tcp/$h/$p && printf '%s\r\n' \"$*\" >&3 && head -n 1 <&3" 2>/dev/null | tr -d '\r'
  }
  if ! command -v redis-server >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      say "installing Debian's redis-server and redis-sentinel with apt-get"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >/dev/null || true
      apt-get install -y -qq --no-install-recommends redis-server redis-sentinel >/dev/null
    else
      say "redis-server is not installed (on Debian/Ubuntu: sudo apt-get install redis-server redis-sentinel)"
      exit 1
    fi
  fi
  if [ "$(resp 127.0.0.1 $mport PING)" != +PONG ]; then
    redis-server --daemonize yes --bind 127.0.0.1 --port $mport --save '' --appendonly no \
      --dir /tmp --logfile /tmp/berth-redis-$mport.log --pidfile /tmp/berth-redis-$mport.pid
  fi
  if [ "$(resp 127.0.0.1 $sport PING)" != +PONG ]; then
    conf=/tmp/berth-sentinel-$sport.conf
    # Sentinel rewrites its config file: a fresh one per start.
    printf '%s\n' "port $sport" "bind 127.0.0.1" "daemonize yes" "dir /tmp" \
      "logfile /tmp/berth-sentinel-$sport.log" "pidfile /tmp/berth-sentinel-$sport.pid" \
      "sentinel monitor berth 127.0.0.1 $mport 1" "sentinel down-after-milliseconds berth 5000" >"$conf"
    if command -v redis-sentinel >/dev/null; then redis-sentinel "$conf"; else redis-server "$conf" --sentinel; fi
  fi
  for _ in $(seq 1 50); do
    [ "$(resp 127.0.0.1 $sport PING)" = +PONG ] && [ "$(resp 127.0.0.1 $mport PING)" = +PONG ] && break
    sleep 0.2
  done
  if [ "$(resp 127.0.0.1 $sport PING)" != +PONG ]; then
    say "redis-sentinel did not answer on 127.0.0.1:$sport. Its last log lines:"
    tail -n 20 /tmp/berth-sentinel-$sport.log >&2 || true
    exit 1
  fi
  say "sentinel up on 127.0.0.1:$sport watching master group berth at 127.0.0.1:$mport"
  exit 0
fi

url="${REDIS_URL:-redis://127.0.0.1:6379}"
# redis://[user:pass@]host[:port][/db] → host and port (enough for a local test server).
hostport="${url#*://}"
hostport="${hostport##*@}"
hostport="${hostport%%/*}"
host="${hostport%%:*}"
port=6379
[ "$hostport" != "$host" ] && port="${hostport##*:}"
[ -n "$host" ] || host=127.0.0.1

ping_ok() {
  if command -v redis-cli >/dev/null; then
    [ "$(redis-cli -h "$host" -p "$port" ping 2>/dev/null)" = PONG ]
  else
    # No redis-cli: speak RESP over bash's /dev/tcp.
    local reply
    reply=$(timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port && printf 'PING\r\n' >&3 && head -c 7 <&3" 2>/dev/null) || return 1
    [ "${reply%$'\r'}" = "+PONG" ]
  fi
}

ping_ok && exit 0

is_debian_root() { [ "$(id -u)" = 0 ] && [ -r /etc/debian_version ] && command -v apt-get >/dev/null; }
is_local() { [ "$host" = 127.0.0.1 ] || [ "$host" = localhost ]; }

if ! is_local; then
  say "No Redis answers at $host:$port (REDIS_URL=$url), and it is not local, so it is not started here."
  exit 1
fi

if ! command -v redis-server >/dev/null; then
  if is_debian_root; then
    say "installing Debian's redis-server with apt-get (no Redis here yet)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || true
    apt-get install -y -qq --no-install-recommends redis-server >/dev/null
    # The package may start a system service on its own; if it answers, we are done.
    ping_ok && { say "up on $host:$port"; exit 0; }
  else
    say "No Redis answers at $host:$port and redis-server is not installed."
    say "Install it (on Debian/Ubuntu: sudo apt-get install redis-server), start it, or set REDIS_URL, then run again."
    exit 1
  fi
fi

log=/tmp/berth-redis.log
say "starting redis-server in the background on 127.0.0.1:$port (no persistence; log: $log)"
redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
  --dir /tmp --logfile "$log" --pidfile "/tmp/berth-redis-$port.pid"
for _ in $(seq 1 50); do
  ping_ok && break
  sleep 0.2
done

if ! ping_ok; then
  say "redis-server did not answer within 10 s. Its last log lines:"
  tail -n 20 "$log" >&2 || true
  exit 1
fi
say "up on $host:$port ($(redis-server --version | cut -d' ' -f3))"
