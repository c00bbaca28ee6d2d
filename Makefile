# flowd — see README.md. The two commands: `make run` and `make test`.
GO ?= go

.PHONY: run test screenshots test-citus build generate lint lint-helm deps bench test-reliability fuzz docker clean

## run: start flowd with a local PostgreSQL in .data (when DATABASE_URL is unset)
run:
	scripts/run.sh

## test: run every test against a throwaway PostgreSQL, with the race detector
test:
	scripts/test.sh

## screenshots: the browser tests, saving a full-page screenshot of each page they visit under
## testdata-output/ for people to review (make test takes none: they assert nothing)
screenshots:
	FLOWD_TEST_SCREENSHOTS=1 scripts/test.sh ./internal/e2e/...

## test-citus: the flows, consent, webhooks, API and migration suites, several instances on one
## database, and every statement of the benchmark's pgbench scripts run as pgbench prepares it,
## against a throwaway three-node Citus cluster, the tenant tables distributed
## (docs/citus.md); needs the shared Citus tools (FLOWD_CITUS_TOOLS) and
## root to install Citus on first use
CITUS_PACKAGES ?= ./internal/database/... ./cmd/flowd/... ./internal/testkit/benchsql/... ./modules/... ./web/...
test-citus:
	scripts/citus.sh test sh -c 'go test -race -count=1 -timeout 30m $(CITUS_PACKAGES) && \
		go test -race -count=1 -timeout 10m -run TestInstances ./internal/reliability/'

## test-reliability: the reliability and security suite in full — long variants
## (more load, more kills) and every fuzz target for FUZZTIME each (docs/reliability.md)
test-reliability:
	FLOWD_RELIABILITY_LONG=1 scripts/pg.sh test go test -race -count=1 -timeout 30m ./internal/reliability/...
	scripts/fuzz.sh

## fuzz: each go fuzz target for FUZZTIME (default 10s)
fuzz:
	scripts/fuzz.sh

## build: the static flowd binary in bin/, stamped with its version (`flowd version`)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_TIME ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
STAMP = github.com/flowd/flowd/internal/version
LDFLAGS = -s -w -X $(STAMP).stampedVersion=$(VERSION) -X $(STAMP).stampedCommit=$(COMMIT) -X $(STAMP).stampedBuildTime=$(BUILD_TIME)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o bin/flowd ./cmd/flowd

## generate: regenerate templ components (committed)
generate:
	$(GO) tool templ generate

## lint: formatting, vet (also for macOS and Windows, where code that needs Linux, such as
## flowbench's load generator, has a fallback), tidy modules, the generated code being current,
## the OpenAPI document clean for Redocly, with clients generated from it by oapi-codegen,
## ogen and openapi-typescript that compile (fetched with npx, npm ci and go run on first use),
## and the Prometheus alert rules valid and passing their tests (promtool)
lint:
	$(GO) mod tidy -diff
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) vet ./...
	GOOS=windows CGO_ENABLED=0 $(GO) vet ./...
	$(GO) tool templ generate >/dev/null && git diff --exit-code -- '*_templ.go'
	scripts/lint-openapi.sh
	scripts/lint-prometheus.sh
	scripts/lint-helm.sh
	@if command -v golangci-lint >/dev/null; then golangci-lint run ./...; \
	else echo "golangci-lint not installed (go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0): skipped"; fi

## lint-helm: the Helm chart in deploy/helm/flowd — helm lint and helm template for the default
## values and each example, with the Helm pinned in deploy/helm/go.mod, and its Go test, which
## decodes every rendered object strictly and checks the chart's promises (a module of its own,
## so that Helm and the Kubernetes types stay out of flowd's build)
lint-helm:
	scripts/lint-helm.sh

## deps: list the direct dependencies that have a newer patch release (exit 1) or a newer minor
## or major one (listed only), from the Go module proxy
deps:
	scripts/deps.sh

## docker: build the container image (needs a Docker engine)
docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg BUILD_TIME=$(BUILD_TIME) -t flowd .

clean:
	rm -rf bin

## bench: measure flowd against pgbench on a throwaway cluster (FLOWBENCH="-duration 5s" to pass flags;
## FLOWBENCH="-citus" runs on a throwaway three-node Citus cluster, as make test-citus does)
bench:
	$(if $(findstring -citus,$(FLOWBENCH)),scripts/citus.sh test,scripts/pg.sh test) $(GO) run ./cmd/flowbench $(FLOWBENCH)
