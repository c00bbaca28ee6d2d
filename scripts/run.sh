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
  DATABASE_URL=$(scripts/pg.sh dev)
  export DATABASE_URL
  trap 'scripts/pg.sh dev-stop' EXIT
  echo "run.sh: PostgreSQL in .data/pg ($DATABASE_URL)"
fi

# Development defaults: the test eID, webhook receivers on this machine, and
# no load balancer to wait for when Ctrl-C stops flowd.
export FLOWD_TEST_EID=${FLOWD_TEST_EID:-true}
export FLOWD_WEBHOOK_ALLOW_PRIVATE=${FLOWD_WEBHOOK_ALLOW_PRIVATE:-true}
export FLOWD_SHUTDOWN_DELAY=${FLOWD_SHUTDOWN_DELAY:-0}

go build -o bin/flowd ./cmd/flowd
bin/flowd migrate
if bin/flowd help | grep -q '^  flowd demo'; then
  bin/flowd demo --state .data/demo.json
fi
# Not exec: the EXIT trap must stop PostgreSQL after flowd has drained.
bin/flowd serve &
pid=$!
trap 'kill -TERM $pid 2>/dev/null' INT TERM
wait $pid || true
wait $pid 2>/dev/null || true
