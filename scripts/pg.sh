#!/usr/bin/env bash
# pg.sh starts the PostgreSQL clusters that `make run` and `make test` need.
#
#   scripts/pg.sh dev            ensure and start the cluster in .data/pg; prints DATABASE_URL
#   scripts/pg.sh dev-stop       stop it
#   scripts/pg.sh test CMD...    run CMD with TEST_DATABASE_URL set to a throwaway cluster,
#                                removed afterwards (CMD runs as is when TEST_DATABASE_URL is set)
#
# initdb and postgres refuse to run as root; as root we run them as the
# unprivileged `postgres` account (created when missing).
set -euo pipefail

log() { echo "pg.sh: $*" >&2; }

find_bindir() {
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v initdb)")"; return
  fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "PostgreSQL not found; installing it with apt-get"
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
      [ -x "$d/initdb" ] && { echo "$d"; return; }
    done
  fi
  log "PostgreSQL binaries not found: install PostgreSQL 15 (apt-get install postgresql) or set DATABASE_URL"
  exit 1
}

BIN=$(find_bindir)

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

own() { [ "$(id -u)" = 0 ] && chown -R postgres "$@" || true; }

# start DATADIR PORT: start a cluster listening on 127.0.0.1:PORT, socket in DATADIR.
start() {
  local data=$1 port=$2
  as_owner "$BIN/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
    -o "-p $port -k $data -c listen_addresses=127.0.0.1" start >/dev/null
}

init() {
  local data=$1; shift
  mkdir -p "$data"; own "$data"; chmod 700 "$data"
  as_owner "$BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 "$@" >/dev/null
}

free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$(( 20000 + RANDOM % 30000 ))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  log "no free port found"; exit 1
}

case "${1:-}" in
dev)
  root=$(cd "$(dirname "$0")/.." && pwd)
  data="$root/.data/pg"
  port=${FLOWD_DEV_PG_PORT:-54329}
  if [ ! -f "$data/PG_VERSION" ]; then
    log "creating a PostgreSQL cluster in $data (once)"
    init "$data"
  fi
  if ! as_owner "$BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    log "starting PostgreSQL on 127.0.0.1:$port (its log: $data/server.log)"
    start "$data" "$port"
  fi
  if ! as_owner "$BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
    "select 1 from pg_database where datname='flowd'" | grep -q 1; then
    log "creating the database flowd"
    as_owner "$BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres flowd
  fi
  echo "postgres://postgres@127.0.0.1:$port/flowd?sslmode=disable"
  ;;
dev-stop)
  root=$(cd "$(dirname "$0")/.." && pwd)
  data="$root/.data/pg"
  [ -f "$data/PG_VERSION" ] && as_owner "$BIN/pg_ctl" -D "$data" -m fast stop >/dev/null 2>&1 || true
  ;;
test)
  shift
  if [ -n "${TEST_DATABASE_URL:-}" ]; then exec "$@"; fi
  # In memory when the machine has a tmpfs with room (FLOWD_TEST_PG_DIR
  # chooses): hundreds of databases are made from a template and dropped in
  # a run, and a disk would write each of them back for nothing.
  dir=${FLOWD_TEST_PG_DIR:-}
  if [ -z "$dir" ]; then
    dir=${TMPDIR:-/tmp}
    if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(df -Pk /dev/shm | awk 'NR == 2 {print $4}')" -gt 2097152 ]; then
      dir=/dev/shm
    fi
  fi
  data=$(mktemp -d "$dir/flowd-test-pg.XXXXXX")
  chmod 755 "$data"
  cleanup() {
    as_owner "$BIN/pg_ctl" -D "$data/db" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$data"
  }
  trap cleanup EXIT
  init "$data/db" --no-sync
  # Durability is not what tests measure: no fsync and the least WAL. Nor
  # is background work on hundreds of short-lived databases: no autovacuum
  # (a test that needs statistics runs ANALYZE itself), and no JIT, whose
  # compiling costs more than the few large queries of the tests it speeds.
  cat >>"$data/db/postgresql.conf" <<CONF
fsync = off
synchronous_commit = off
full_page_writes = off
wal_level = minimal
max_wal_senders = 0
autovacuum = off
jit = off
max_connections = 300
shared_buffers = 64MB
CONF
  # A free port can be taken between the check and the start: try a few.
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    if start "$data/db" "$port"; then break; fi
    log "could not start PostgreSQL on port $port (attempt $attempt); its log:"
    tail -n 20 "$data/db/server.log" >&2 || true
    if [ "$attempt" = 5 ]; then exit 1; fi
    sleep 1
  done
  # A loaded machine can take seconds to start a backend; flowd's own default would fail it.
  export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable&connect_timeout=30"
  export TEST_PG_BINDIR="$BIN"
  log "throwaway cluster on port $port"
  set +e
  "$@"
  status=$?
  exit $status
  ;;
*)
  echo "usage: $0 dev|dev-stop|test CMD..." >&2; exit 2 ;;
esac
