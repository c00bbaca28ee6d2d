#!/usr/bin/env bash
# lint-openapi.sh checks that the OpenAPI document, web/openapi/openapi.yaml, is clean for the
# tools people feed it to. `make lint` runs it; `make test` does not, as it fetches the tools
# (pinned here and in web/openapi/typescript/package-lock.json) from the npm registry and the Go
# module proxy on first use.
#
#   1. Redocly CLI's recommended rules report no error. Its settings, and the problems it is
#      told to ignore, are beside the document: web/openapi/redocly.yaml and
#      web/openapi/.redocly.lint-ignore.yaml.
#   2. Three code generators, each with its default settings, make a client from the document as
#      flowd serves it (/api/openapi.json), and each client compiles: oapi-codegen and ogen for
#      Go, in modules of their own in a temporary folder, and openapi-typescript, whose types
#      web/openapi/typescript/client.ts uses under a strict tsc.
#   3. The Go client the tests drive, web/openapi/flowdapi, is what oapi-codegen makes of the
#      document now.
set -euo pipefail
cd "$(dirname "$0")/.."

redocly_version=2.77.0
oapi_codegen_version=v2.8.2
ogen_version=v1.24.0

echo "redocly lint (@redocly/cli@$redocly_version)"
# No usage report and no update check: the lint needs nothing from the network but the package.
REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
	npx --yes "@redocly/cli@$redocly_version" lint --config web/openapi/redocly.yaml web/openapi/openapi.yaml

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
doc=$tmp/openapi.json
go run ./web/openapi/internal/openapijson >"$doc"

# compile builds and vets the Go package generated into the folder $1, in a module of its own.
compile() {
	(
		cd "$1"
		go mod init example.com/flowdclient >/dev/null 2>&1
		go mod tidy >/dev/null 2>&1 || go mod tidy
		go build ./... && go vet ./...
	)
}

echo "oapi-codegen $oapi_codegen_version: default settings"
mkdir "$tmp/oapi-codegen"
go run "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@$oapi_codegen_version" \
	-package flowdapi -o "$tmp/oapi-codegen/flowdapi.gen.go" "$doc"
compile "$tmp/oapi-codegen"

echo "ogen $ogen_version: default settings"
mkdir "$tmp/ogen"
# ogen's warnings and notes are left out: that it writes header names in Go's canonical form
# (DPoP as Dpop), and that a pattern or length does not apply to a time.Time or url.URL.
go run "github.com/ogen-go/ogen/cmd/ogen@$ogen_version" --target "$tmp/ogen/flowdapi" --package flowdapi \
	--clean "$doc" 2>&1 | { grep -Ev '^(WARN|INFO)[[:space:]]' || true; }
compile "$tmp/ogen"

echo "openapi-typescript and a strict tsc (web/openapi/typescript)"
ts=web/openapi/typescript
npm ci --prefix "$ts" --no-audit --no-fund --loglevel=error
"$ts/node_modules/.bin/openapi-typescript" "$doc" -o "$ts/flowd.d.ts" --silent
"$ts/node_modules/.bin/tsc" -p "$ts"

echo "web/openapi/flowdapi: current"
go run "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@$oapi_codegen_version" \
	-config web/openapi/flowdapi/oapi-codegen.yaml -o "$tmp/flowdapi.gen.go" "$doc"
if ! diff -u web/openapi/flowdapi/flowdapi.gen.go "$tmp/flowdapi.gen.go" >"$tmp/flowdapi.diff"; then
	head -40 "$tmp/flowdapi.diff"
	echo "web/openapi/flowdapi/flowdapi.gen.go is not current: run" \
		"go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@$oapi_codegen_version" \
		"-config web/openapi/flowdapi/oapi-codegen.yaml -o web/openapi/flowdapi/flowdapi.gen.go <(go run ./web/openapi/internal/openapijson)"
	exit 1
fi
echo "openapi: clean for Redocly, oapi-codegen, ogen and openapi-typescript"
