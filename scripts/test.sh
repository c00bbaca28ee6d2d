#!/usr/bin/env bash
# test.sh is `make test`: every test, with the race detector, against a
# throwaway PostgreSQL (or TEST_DATABASE_URL when set); arguments, when
# given, replace ./... (packages and go test flags). It installs Chromium
# for the browser tests, and Node.js with the locked client library of the
# independent-client test (internal/e2e/testdata/oauth4webapi), when they are
# missing and apt-get and npm can.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if ! command -v chromium >/dev/null 2>&1 && [ -z "${FLOWD_CHROMIUM:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing chromium for the browser tests" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi

if ! command -v npm >/dev/null 2>&1 && [ -z "${FLOWD_NODE:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing Node.js for the independent-client test" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  fi
fi
clientlib=internal/e2e/testdata/oauth4webapi
if command -v npm >/dev/null 2>&1 && [ ! "$clientlib/node_modules/.package-lock.json" -nt "$clientlib/package-lock.json" ]; then
  npm ci --prefix "$clientlib" --no-audit --no-fund --loglevel=error >&2
fi

# gotestsum (a tool of go.mod) prints each package as it finishes and the
# output of each failed test in full; every event goes to testdata-output/
# for a look at where the time went (go tool gotestsum tool slowest).
# Most tests wait on PostgreSQL, the browser or a server of their own far more
# than they compute: packages (-p) and tests (-parallel) run several to a
# core, which go test would limit to one.
mkdir -p testdata-output
# Without arguments every package runs, the longest first (by the last run's
# times, else by their number of test files), so that the longest does not
# start last. go test starts packages in the order they are named.
if [ $# -eq 0 ]; then
  {
    if [ -f testdata-output/test.json ]; then
      sed -nE 's/.*"Action":"(pass|fail)","Package":"([^"]*)","Elapsed":([0-9.]+).*/\3 \2/p' testdata-output/test.json
    fi
    go list -f '{{len .TestGoFiles}} {{len .XTestGoFiles}} {{.ImportPath}}' ./... | awk '{print ($1 + $2) / 1000, $3}'
  } | sort -rn | awk '!seen[$2]++ {print $2}' > testdata-output/packages
  # Only packages that still exist.
  set -- $(go list ./... | grep -Fxf - testdata-output/packages)
fi
status=0
scripts/pg.sh test go tool gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg \
  --jsonfile testdata-output/test.json -- \
  -race -count=1 -timeout 9m -p 4 -parallel 8 "$@" || status=$?
echo "The slowest tests (go tool gotestsum tool slowest --jsonfile testdata-output/test.json):"
# sed reads to the end where head would stop early: under pipefail, the
# writer's broken pipe would replace the tests' status with its own.
go tool gotestsum tool slowest --jsonfile testdata-output/test.json --threshold 20s | sed -n 1,10p || true
exit $status
