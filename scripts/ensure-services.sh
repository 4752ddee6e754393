#!/usr/bin/env bash
# What the test suite needs besides node_modules, made sure of before it runs
# (`npm test` calls this first, and so .ci/run through it):
#   - PostgreSQL on 127.0.0.1:5432, trust authentication for user postgres;
#   - Redis on 127.0.0.1:6379, and the redis-server binary (fault and Sentinel
#     tests run servers of their own);
#   - Chromium at /usr/bin/chromium (the browser tests).
# On Debian as root it installs what is missing (apt-get) and starts Postgres
# and Redis when they are down. Anywhere else it changes nothing: it stops at
# once, naming the packages to install and what to start.
# With TEST_POSTGRES_URL or TEST_REDIS_URL set, the tests use those servers and
# the local one is neither checked nor started.
set -euo pipefail

log() { printf '[ensure-services] %s\n' "$*" >&2; }

# Whether something accepts TCP connections on host $1, port $2 (bash's /dev/tcp, no client needed).
port_open() {
  if command -v timeout >/dev/null; then
    timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
  else
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
  fi
}

postgres_installed() { ls -d /etc/postgresql/*/main >/dev/null 2>&1; }

packages=()   # Debian packages to install
problems=()   # what is missing, in words
starts=()     # services installed but not running

if [ -z "${TEST_POSTGRES_URL:-}" ] && ! port_open 127.0.0.1 5432; then
  if postgres_installed; then
    starts+=(postgresql)
  else
    packages+=(postgresql)
    problems+=("PostgreSQL (nothing on 127.0.0.1:5432)")
  fi
fi
if ! command -v redis-server >/dev/null; then
  packages+=(redis-server)
  problems+=("Redis (no redis-server binary)")
elif [ -z "${TEST_REDIS_URL:-}" ] && ! port_open 127.0.0.1 6379; then
  starts+=(redis)
fi
if [ ! -x /usr/bin/chromium ]; then
  packages+=(chromium)
  problems+=("Chromium (no /usr/bin/chromium)")
fi
if [ ${#packages[@]} -eq 0 ] && [ ${#starts[@]} -eq 0 ]; then exit 0; fi

if [ ! -r /etc/debian_version ] || ! command -v apt-get >/dev/null || [ "$(id -u)" != 0 ]; then
  [ ${#problems[@]} -gt 0 ] && log "missing: $(IFS=,; echo "${problems[*]}" | sed 's/,/, /g')"
  [ ${#packages[@]} -gt 0 ] && log "install (Debian, Ubuntu): sudo apt-get install -y ${packages[*]}   (other systems: their PostgreSQL, Redis and Chromium packages, Chromium at /usr/bin/chromium)"
  for service in "${starts[@]}"; do
    case "$service" in
      postgresql) log "PostgreSQL is installed but not running on 127.0.0.1:5432: start it (sudo pg_ctlcluster <version> main start), with trust authentication for 127.0.0.1" ;;
      redis) log "Redis is installed but not running on 127.0.0.1:6379: start it (redis-server --daemonize yes --save '' --appendonly no)" ;;
    esac
  done
  log "or point the tests elsewhere with TEST_POSTGRES_URL and TEST_REDIS_URL"
  exit 1
fi

# Debian, as root: install what is missing, then start what is down.
if [ ${#packages[@]} -gt 0 ]; then
  log "installing ${packages[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
fi

ensure_postgres() {
  [ -n "${TEST_POSTGRES_URL:-}" ] && return
  port_open 127.0.0.1 5432 && return
  local version hba
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  hba="/etc/postgresql/$version/main/pg_hba.conf"
  # The tests connect as postgres over TCP without a password, as on the development machines.
  if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$hba"
  fi
  log "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || pg_ctlcluster --skip-systemctl-redirect "$version" main restart
  for _ in $(seq 1 30); do port_open 127.0.0.1 5432 && return; sleep 1; done
  log "PostgreSQL did not come up"; exit 1
}

ensure_redis() {
  [ -n "${TEST_REDIS_URL:-}" ] && return
  port_open 127.0.0.1 6379 && return
  log "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/tests.log
  for _ in $(seq 1 30); do port_open 127.0.0.1 6379 && return; sleep 1; done
  log "Redis did not come up"; exit 1
}

ensure_postgres
ensure_redis
