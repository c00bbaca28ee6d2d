#!/usr/bin/env bash
# test.sh is `make test`: every test, with the race detector, against a
# throwaway PostgreSQL (or TEST_DATABASE_URL when set). It installs Chromium
# for the browser tests when it is missing and apt-get can.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if ! command -v chromium >/dev/null 2>&1 && [ -z "${FLOWD_CHROMIUM:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing chromium for the browser tests" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi

exec scripts/pg.sh test go test -race -count=1 -timeout 9m "${@:-./...}"
