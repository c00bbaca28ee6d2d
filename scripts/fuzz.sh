#!/usr/bin/env bash
# fuzz.sh is `make fuzz`: each go fuzz target of flowd for a bounded time
# (FUZZTIME, 10s by default), against a throwaway PostgreSQL. Under
# `make test` the same targets run their seed corpora as ordinary tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fuzztime=${FUZZTIME:-10s}
targets=(
  ./web/api:FuzzCreateFlowBody
  ./web/oauth:FuzzTokenRequest
  ./web/api:FuzzFlowListQuery
  ./web/api:FuzzAppendString
  ./modules/identity/tokens:FuzzVerifyAccessToken
  ./modules/identity/tokens:FuzzVerifySignedClaims
  ./internal/reliability:FuzzConsentDecisionForm
  ./internal/jsondup:FuzzFind
  ./internal/nationalid:FuzzCanonical
  ./internal/nationalid:FuzzSpellingsOfOnePerson
)
run() {
  for t in "${targets[@]}"; do
    pkg=${t%%:*} name=${t##*:}
    echo "fuzz: $name ($pkg) for $fuzztime" >&2
    go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg"
  done
}
if [ -n "${TEST_DATABASE_URL:-}" ]; then run; exit; fi
export -f run; export fuzztime
targets_str="${targets[*]}"
exec scripts/pg.sh test bash -c "targets=($targets_str); $(declare -f run); run"
