#!/usr/bin/env bash
# lint-helm.sh checks the Helm chart in deploy/helm/flowd: `helm lint --strict` and `helm template`
# pass for the default values and for each example, and the chart's Go test (deploy/helm) finds
# every rendered object strictly valid and keeping the chart's promises. `make lint` runs it.
# Helm is the version pinned in deploy/helm/go.mod, run as a Go tool: nothing but the Go module
# proxy is asked for it. deploy/helm is a module of its own, so that Helm and the Kubernetes API
# types never enter flowd's build.
set -euo pipefail
cd "$(dirname "$0")/../deploy/helm"
GO=${GO:-go}

$GO mod tidy -diff
$GO vet ./...
helm=$($GO tool -n helm)

# The default values need only flowd's public address, the one value without a default.
defaults=(--set baseUrl=https://flowd.example.com)
run() {
	echo "helm $1 ${*:2}" >&2
	"$helm" "$@" 2> >(grep -v 'found symbolic link in path' >&2)
}
run lint --strict flowd "${defaults[@]}"
run template flowd flowd "${defaults[@]}" >/dev/null
for example in flowd/examples/*.yaml; do
	run lint --strict flowd -f "$example"
	run template flowd flowd -f "$example" >/dev/null
done
$GO test -count=1 ./...
