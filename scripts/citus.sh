#!/usr/bin/env bash
# citus.sh runs tests on Citus, as `make test-citus` does:
#
#   scripts/citus.sh test CMD...   run CMD with FLOWD_TEST_CITUS=1 and TEST_DATABASE_URL set to the
#                                  coordinator of a throwaway three-node Citus cluster (a coordinator
#                                  and two workers on 127.0.0.1), removed afterwards; with
#                                  TEST_DATABASE_URL set, CMD runs against that coordinator
#
# The cluster comes from the shared Citus tools (FLOWD_CITUS_TOOLS, by default ../shared/tools/citus
# beside the repository): cluster.sh installs a Citus 13.2 build for PostgreSQL 15 on first use,
# which needs root. Users install Citus from its own packages or images (docs/citus.md).
set -euo pipefail

log() { echo "citus.sh: $*" >&2; }

root=$(cd "$(dirname "$0")/.." && pwd)
tools=${FLOWD_CITUS_TOOLS:-$root/../shared/tools/citus}

free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_base prints a port that is free with the two above it.
free_base() {
  local p
  for _ in $(seq 1 50); do
    p=$(( 20000 + RANDOM % 30000 ))
    if free "$p" && free $((p + 1)) && free $((p + 2)); then echo "$p"; return; fi
  done
  log "no three free ports found"; exit 1
}

# start_cluster makes a cluster in $1 with its coordinator on port $2, set
# for tests, and sets TEST_DATABASE_URL to its coordinator.
start_cluster() {
  local dir=$1 port=$2 node
  "$tools/cluster.sh" start "$dir" "$port" >/dev/null || return 1
  "$tools/cluster.sh" stop "$dir"
  # Durability is not what tests measure; each test's database on each
  # node keeps a Citus daemon, which takes a worker process.
  for node in "$dir"/c "$dir"/w1 "$dir"/w2; do
    cat >>"$node/postgresql.conf" <<CONF
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 128MB
max_worker_processes = 256
CONF
  done
  TEST_DATABASE_URL=$("$tools/cluster.sh" start "$dir" "$port") || return 1
  # A loaded machine can take seconds to start a backend; flowd's own default would fail it.
  case "$TEST_DATABASE_URL" in *\?*) TEST_DATABASE_URL="$TEST_DATABASE_URL&" ;; *) TEST_DATABASE_URL="$TEST_DATABASE_URL?" ;; esac
  TEST_DATABASE_URL="${TEST_DATABASE_URL}connect_timeout=30"
}

case "${1:-}" in
test)
  shift
  export FLOWD_TEST_CITUS=1
  if [ -n "${TEST_DATABASE_URL:-}" ]; then exec "$@"; fi
  if [ ! -x "$tools/cluster.sh" ]; then
    log "$tools/cluster.sh not found: set FLOWD_CITUS_TOOLS to the directory of the Citus tools"
    exit 1
  fi
  dir=""
  cleanup() {
    [ -n "$dir" ] || return 0
    "$tools/cluster.sh" stop "$dir" >/dev/null 2>&1 || true
    rm -rf "$dir"
  }
  trap cleanup EXIT
  # A port found free may be taken before the cluster listens on it (other
  # clusters start beside this one): a failed start shows the nodes' logs
  # and is tried again on other ports.
  for attempt in 1 2 3; do
    cleanup
    dir=$(mktemp -d /tmp/flowd-test-citus.XXXXXX)
    chmod 755 "$dir"
    port=$(free_base)
    if start_cluster "$dir" "$port"; then break; fi
    log "the cluster did not start on port $port (attempt $attempt); its logs:"
    tail -n 20 "$dir"/*.log >&2 || true
    [ "$attempt" -lt 3 ] || exit 1
  done
  export TEST_DATABASE_URL
  log "throwaway Citus cluster, coordinator on port $port"
  set +e
  "$@"
  exit $?
  ;;
*)
  echo "usage: $0 test CMD..." >&2; exit 2 ;;
esac
