#!/usr/bin/env bash
# lint-openapi.sh checks that the OpenAPI document, web/openapi/openapi.yaml, is clean for the
# tools people feed it to. `make lint` runs it; `make test` does not, as it fetches both tools
# (pinned here) from the npm registry and the Go module proxy on first use.
#
#   1. Redocly CLI's recommended rules report no error. Its settings, and the one problem it is
#      told to ignore, are beside the document: web/openapi/redocly.yaml and
#      web/openapi/.redocly.lint-ignore.yaml.
#   2. oapi-codegen generates the models alone, and a client with its models, into a module of
#      their own in a temporary folder, and both compile there.
set -euo pipefail
cd "$(dirname "$0")/.."

redocly_version=2.77.0
oapi_codegen_version=v2.8.2
doc=$PWD/web/openapi/openapi.yaml

echo "redocly lint (@redocly/cli@$redocly_version)"
# No usage report and no update check: the lint needs nothing from the network but the package.
REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
	npx --yes "@redocly/cli@$redocly_version" lint --config web/openapi/redocly.yaml "$doc"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for generate in models client; do
	dir=$tmp/$generate
	mkdir -p "$dir"
	# skip-prune: oapi-codegen drops the components that no path refers to, and it does not
	# count references from the webhooks section, so it would drop WebhookEvent yet generate the
	# webhook's request type from it. Redocly's no-unused-components rule above already keeps
	# every component in use, so generating them all adds nothing unused.
	cat >"$dir/oapi-codegen.yaml" <<-CONFIG
		package: flowdapi
		output: $dir/flowdapi.gen.go
		generate:
		  models: true
		  client: $([ "$generate" = client ] && echo true || echo false)
		output-options:
		  skip-prune: true
	CONFIG
	echo "oapi-codegen $oapi_codegen_version: $generate"
	go run "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@$oapi_codegen_version" \
		-config "$dir/oapi-codegen.yaml" "$doc"
	(
		cd "$dir"
		go mod init example.com/flowdapi >/dev/null 2>&1
		go mod tidy >/dev/null 2>&1 || go mod tidy
		go build ./... && go vet ./...
	)
done
echo "openapi: clean for Redocly and oapi-codegen"
