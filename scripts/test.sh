#!/usr/bin/env bash
# test.sh is `make test`: every test, with the race detector, against a
# throwaway PostgreSQL (or TEST_DATABASE_URL when set); arguments, when
# given, replace ./... (packages and go test flags). It installs Chromium
# for the browser tests, and Node.js with the locked client library of the
# independent-client test (internal/e2e/testdata/oauth4webapi), when they are
# missing and apt-get and npm can.
#
# It says when compiling starts, prints a line of progress at least every
# 30 s (packages done, the ones running and for how long), each package as it
# finishes with the output of any failed test in full, and at the end the
# slowest packages and tests. Every event goes to testdata-output/test.json.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$(date +%s)
say() { echo "test.sh $(elapsed): $*" >&2; }
elapsed() { local s=$(( $(date +%s) - start )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

if ! command -v chromium >/dev/null 2>&1 && [ -z "${FLOWD_CHROMIUM:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing chromium for the browser tests"
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi

if ! command -v npm >/dev/null 2>&1 && [ -z "${FLOWD_NODE:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Node.js for the independent-client test"
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  fi
fi
clientlib=internal/e2e/testdata/oauth4webapi
if command -v npm >/dev/null 2>&1 && [ ! "$clientlib/node_modules/.package-lock.json" -nt "$clientlib/package-lock.json" ]; then
  npm ci --prefix "$clientlib" --no-audit --no-fund --loglevel=error >&2
fi

mkdir -p testdata-output
# The reliability suite runs flowd as processes of their own, killed with
# SIGKILL: the binary is built here, before any test's clock starts.
say "building flowd for the reliability suite"
go build -o testdata-output/flowd ./cmd/flowd
export FLOWD_TEST_BINARY="$root/testdata-output/flowd"

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
json=testdata-output/test.json
: > "$json"

# progress prints what the event stream says so far: packages finished
# and failed, and those started and not finished.
progress() {
  awk '
    match($0, /"Action":"[a-z]+"/) { action = substr($0, RSTART + 10, RLENGTH - 11) }
    !match($0, /"Package":"[^"]*"/) { next }
    { pkg = substr($0, RSTART + 11, RLENGTH - 12); sub(/^github.com\/flowd\/flowd\//, "", pkg) }
    /"Test":/ { next }
    action == "start" { started[pkg] = 1 }
    action == "pass" || action == "skip" { done[pkg] = 1 }
    action == "fail" { done[pkg] = 1; failed[pkg] = 1 }
    END {
      n = 0; f = 0; r = ""
      for (p in done) { n++; if (p in failed) f++ }
      for (p in started) if (!(p in done)) r = r (r == "" ? "" : ", ") p
      if (r == "") r = "none"
      printf "%d packages done (%d failed); running: %s\n", n, f, r
    }' "$json" 2>/dev/null
}

say "compiling the tests (go test -race) and running them"
( while sleep 30; do
    if [ -s "$json" ]; then say "$(progress)"; else say "still compiling"; fi
  done ) &
ticker=$!
trap 'kill $ticker 2>/dev/null || true' EXIT

# gotestsum (a tool of go.mod) prints each package as it finishes and the
# output of each failed test in full. Most tests wait on PostgreSQL, the
# browser or a server of their own more than they compute: packages (-p)
# and tests (-parallel) run two to a core. The timeout is a backstop for a
# hang, not a measure of speed: it leaves room for a machine busy with other
# work, and the waits of testwait end shortly before it.
# The race detector waits a second at each test binary's exit for late
# reports; each test waits for its own goroutines instead.
export GORACE=${GORACE:-atexit_sleep_ms=0}
status=0
scripts/pg.sh test go tool gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg \
  --jsonfile "$json" -- \
  -race -ldflags=-w -count=1 -timeout 15m -p 4 -parallel 4 "$@" || status=$?
kill $ticker 2>/dev/null || true

say "done"
echo "The slowest packages:"
sed -nE 's/.*"Action":"(pass|fail)","Package":"github.com\/flowd\/flowd\/([^"]*)","Elapsed":([0-9.]+).*/\3 \2 \1/p' "$json" |
  sort -rn | sed -n 1,5p | awk '{printf "  %7.1fs %s%s\n", $1, $2, ($3 == "fail" ? " (failed)" : "")}'
echo "The slowest tests (go tool gotestsum tool slowest --jsonfile $json):"
# sed reads to the end where head would stop early: under pipefail, the
# writer's broken pipe would replace the tests' status with its own.
go tool gotestsum tool slowest --jsonfile "$json" --threshold 1ms | sed -n 1,10p || true
exit $status
