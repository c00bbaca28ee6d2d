#!/usr/bin/env bash
# run.sh is `make run`: flowd with everything it needs on this machine.
# Without DATABASE_URL it starts (creating it the first time) a PostgreSQL
# cluster in .data/pg; secrets a deployment must supply are generated once
# into .data/secrets.env. Ctrl-C stops flowd and that cluster; data stays.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p .data

if [ ! -f .data/secrets.env ]; then
  umask 077
  {
    echo "FLOWD_KEY_ENCRYPTION_KEY=$(head -c 32 /dev/urandom | base64)"
    echo "FLOWD_SESSION_KEY=$(head -c 32 /dev/urandom | base64)"
    echo "FLOWD_DATA_KEY=$(head -c 32 /dev/urandom | base64)"
  } > .data/secrets.env
  echo "run.sh: generated development secrets in .data/secrets.env"
fi
# Settings already in the environment win over the generated ones.
while IFS='=' read -r key value; do
  [ -n "$key" ] && [ -z "${!key:-}" ] && export "$key=$value"
done < .data/secrets.env

if [ -z "${DATABASE_URL:-}" ]; then
  echo "run.sh: starting PostgreSQL in .data/pg (DATABASE_URL is not set)"
  DATABASE_URL=$(scripts/pg.sh dev)
  export DATABASE_URL
  trap 'scripts/pg.sh dev-stop' EXIT
  echo "run.sh: PostgreSQL is up ($DATABASE_URL)"
fi

# Development defaults: the test eID, webhook receivers on this machine, and
# no load balancer to wait for when Ctrl-C stops flowd.
export FLOWD_TEST_EID=${FLOWD_TEST_EID:-true}
export FLOWD_WEBHOOK_ALLOW_PRIVATE=${FLOWD_WEBHOOK_ALLOW_PRIVATE:-true}
export FLOWD_SHUTDOWN_DELAY=${FLOWD_SHUTDOWN_DELAY:-0}

if [ -x bin/flowd ]; then
  echo "run.sh: building bin/flowd"
else
  echo "run.sh: building bin/flowd (the first build compiles every dependency: a few minutes)"
fi
stamp=github.com/flowd/flowd/internal/version
go build -ldflags "-X $stamp.stampedVersion=$(git describe --tags --always --dirty 2>/dev/null) -X $stamp.stampedCommit=$(git rev-parse HEAD 2>/dev/null) -X $stamp.stampedBuildTime=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  -o bin/flowd ./cmd/flowd
echo "run.sh: migrating the database"
bin/flowd migrate
echo "run.sh: seeding the demo organization (once; .data/demo.json remembers it)"
bin/flowd demo --state .data/demo.json
echo "run.sh: starting flowd serve on ${FLOWD_BASE_URL:-http://localhost:8080} (Ctrl-C stops it)"
# Not exec: the EXIT trap must stop PostgreSQL after flowd has drained.
bin/flowd serve &
pid=$!
trap 'kill -TERM $pid 2>/dev/null' INT TERM
wait $pid || true
wait $pid 2>/dev/null || true
