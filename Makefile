# Hubu's developer entry points. `make help` lists them; CI (.ci/run) runs generate-check, lint, test, interop and images-test.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# The workspace's modules (go.work), and every Go package in them.
MODULES := kit proto sql services/hubu services/gongbu services/mockflux router e2e
PKGS := hubu.dev/hubu/kit/... hubu.dev/hubu/proto/... hubu.dev/hubu/sql/... \
	hubu.dev/hubu/services/hubu/... hubu.dev/hubu/services/gongbu/... hubu.dev/hubu/services/mockflux/... \
	hubu.dev/hubu/router/... hubu.dev/hubu/e2e/...
GENERATED := proto/hubuapi proto/gongbuapi proto/bflapi proto/hubuspec proto/gongbuspec proto/bflspec sql/hubu/hubudb sql/gongbu/gongbudb \
	sql/router/routerdb sql/router/routerpg sql/router/prealloc/preallocdb
# The official TypeScript MCP client, which the router's tests drive as well as the Go SDK's.
TSCLIENT := router/testdata/tsclient
OAUTHCLIENT := e2e/testdata/oauthclient
# The real harnesses (Codex, Claude Code) that make interop runs, pinned with a lockfile.
HARNESSES := e2e/interop/harnesses

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The generators and the linter, pinned in tools/go.mod (a module of their own, outside the
# workspace, so their dependencies stay out of the services' graphs) and built into bin/tools.
TOOLS := bin/tools
# A tool's package path ends in its name, or in its name and a major version (goreleaser/v2).
$(TOOLS)/%: tools/go.mod tools/go.sum
	@pkg=$$(GOWORK=off go list -C tools tool | grep -E '/$*(/v[0-9]+)?$$'); \
	[ -n "$$pkg" ] || { echo "$*: no such tool in tools/go.mod" >&2; exit 1; }; \
	echo "building $* ($$pkg)"; GOWORK=off go build -C tools -o ../$(TOOLS)/$* $$pkg

.PHONY: generate
generate: $(TOOLS)/oapi-codegen $(TOOLS)/sqlc ## regenerate Go code from the OpenAPI specs (oapi-codegen) and the SQL queries (sqlc)
	for api in hubuapi gongbuapi bflapi; do (cd proto/$$api && ../../$(TOOLS)/oapi-codegen -config oapi-codegen.yaml ../$${api%api}.openapi.yaml); done
	for spec in hubuspec gongbuspec bflspec; do (cd proto/$$spec && ../../$(TOOLS)/oapi-codegen -config oapi-codegen.yaml ../$${spec%spec}.openapi.yaml); done
	cd sql && ../$(TOOLS)/sqlc generate

.PHONY: generate-check
generate-check: generate ## regenerate and fail if the committed generated code was stale
	git diff --exit-code --stat -- $(GENERATED) || { echo "generated code is stale: run 'make generate' and commit"; exit 1; }
	untracked=$$(git ls-files --others --exclude-standard -- $(GENERATED)); \
	if [ -n "$$untracked" ]; then echo "generated files not committed:"; echo "$$untracked"; exit 1; fi

# The stack that up, demo and down work on. NAME=x (or HUBU_STACK_NAME=x) is a stack of its own
# beside the default one: databases hubu_x and gongbu_x, state in .hubu/stacks/x/, ports of its
# own (chosen free the first time, kept in .hubu/stacks/x/addresses.json). Without a name: the
# default stack, .hubu/ and ports 8081-8083 and 8090 (e2e/stack/place.go says the same in Go).
STACK_NAME = $(or $(NAME),$(HUBU_STACK_NAME))
STACK_DIR = $(if $(STACK_NAME),.hubu/stacks/$(STACK_NAME),.hubu)
check-stack-name = [[ "$(STACK_NAME)" =~ ^[a-z0-9_]{0,40}$$ ]] || { echo "NAME=$(STACK_NAME): use 1 to 40 lower-case letters, digits and underscores"; exit 2; }

.PHONY: up
up: ## run the whole stack in the foreground on loopback (Ctrl-C stops it); writes .hubu/stack.env; make up NAME=x runs a separate stack in .hubu/stacks/x/
	url=$$(env -u TEST_DATABASE_URL scripts/ensure-postgres.sh --private); HUBU_STACK_DATABASE_URL="$$url" HUBU_STACK_NAME="$(STACK_NAME)" go run ./e2e/cmd/hubu-stack

.PHONY: demo
demo: ## a scripted session through the running stack's router (start it with make up; NAME=x for a named stack); make demo RESUME=HANDLE resumes an approved spend
	HUBU_STACK_NAME="$(STACK_NAME)" go run ./e2e/cmd/hubu-demo $(if $(RESUME),--resume '$(RESUME)')

.PHONY: down
down: ## stop a stack started in the background (make up &; NAME=x for a named stack)
	$(check-stack-name)
	if [ -f $(STACK_DIR)/stack.pid ]; then kill -TERM "$$(cat $(STACK_DIR)/stack.pid)"; echo "stopping the stack in $(STACK_DIR)"; else echo "no stack is running in $(STACK_DIR)"; fi

.PHONY: build
# -buildvcs=auto records the commit, its time and whether the tree was modified (--version prints
# them) where there is a checkout, whatever GOFLAGS says; a tag v* becomes the version.
VERSION_LDFLAGS = -X hubu.dev/hubu/kit/buildinfo.version=$$(git describe --tags --match 'v*' --dirty 2>/dev/null || echo devel)

build: ## build every binary into bin/
	go build -buildvcs=auto -ldflags "$(VERSION_LDFLAGS)" -o bin/ ./services/hubu/cmd/... ./services/gongbu/cmd/... ./services/mockflux/cmd/... ./router/cmd/...

.PHONY: release
release: $(TOOLS)/goreleaser ## build the release of the tag at HEAD into dist/: an archive per platform and checksums.txt (docs/development.md#cutting-a-release)
	@git describe --tags --exact-match --match 'v[0-9]*' HEAD >/dev/null 2>&1 || { echo "make release: HEAD has no release tag (v1.2.3): cut one first (docs/development.md#cutting-a-release)" >&2; exit 1; }
	$(TOOLS)/goreleaser release --clean

.PHONY: release-check
release-check: $(TOOLS)/goreleaser ## check .goreleaser.yaml and build every release archive as a snapshot into dist/ (nothing is published; the first build of goreleaser takes long)
	$(TOOLS)/goreleaser check
	$(TOOLS)/goreleaser release --snapshot --clean

# Container images, one per binary, FROM scratch with static binaries built here (deploy/):
# nothing is pulled. HUBU_IMAGE_PREFIX and HUBU_IMAGE_TAG name them, hubu/NAME:dev by default:
# the names deploy/compose.yaml reads, so one export serves both.
HUBU_IMAGE_PREFIX ?= hubu/
HUBU_IMAGE_TAG ?= dev
# The names these had before, which compose never read: refused rather than ignored, since
# ignoring them builds :dev while the caller expects their tag.
old-image-names = $(foreach v,IMAGE_PREFIX IMAGE_TAG,$(if $(filter-out undefined,$(origin $(v))),$(error $(v) is now HUBU_$(v), the name deploy/compose.yaml reads too: make images HUBU_$(v)=VALUE)))

# The images need a Docker daemon; scripts/ensure-docker.sh starts one only when asked
# (HUBU_START_DOCKERD=1, as CI does), since the one it starts has no bridge network.
.PHONY: images
images: ## the container images (hubu with hubuctl, gongbu, mockflux, hubu-unified-mcp): make images [HUBU_IMAGE_PREFIX=hubu/] [HUBU_IMAGE_TAG=dev]; needs a Docker daemon (HUBU_START_DOCKERD=1 starts a bare one)
	$(old-image-names)
	scripts/ensure-docker.sh
	HUBU_IMAGE_PREFIX="$(HUBU_IMAGE_PREFIX)" HUBU_IMAGE_TAG="$(HUBU_IMAGE_TAG)" deploy/build-images.sh

.PHONY: images-test
images-test: ## build the images (tagged for the test alone) and run a whole spend through them as containers (--network host, against the test Postgres); needs a Docker daemon (HUBU_START_DOCKERD=1 starts a bare one)
	scripts/ensure-docker.sh
	url=$$(scripts/ensure-postgres.sh); start=$$(date +%s); \
	TEST_DATABASE_URL="$$url" go test -tags images -count=1 -timeout 15m -run '^TestImages$$' -v hubu.dev/hubu/e2e/images/; \
	echo "images-test: $$(( $$(date +%s) - start ))s"

$(TSCLIENT)/node_modules/.package-lock.json: $(TSCLIENT)/package-lock.json
	cd $(TSCLIENT) && npm ci --no-audit --no-fund --loglevel=error

$(OAUTHCLIENT)/node_modules/.package-lock.json: $(OAUTHCLIENT)/package-lock.json
	cd $(OAUTHCLIENT) && npm ci --no-audit --no-fund --loglevel=error

.PHONY: test
test: test-tools $(TSCLIENT)/node_modules/.package-lock.json $(OAUTHCLIENT)/node_modules/.package-lock.json ## run every test against a real Postgres (found or started by scripts/ensure-postgres.sh)
	url=$$(scripts/ensure-postgres.sh); TEST_DATABASE_URL="$$url" go test -race -count=1 $(PKGS)

.PHONY: test-tools
test-tools: ## check for the programs make test drives (Node, Chromium, Prometheus, zsh, pg_dump); install the missing ones on Debian or Ubuntu as root, or name them all
	scripts/ensure-test-tools.sh

.PHONY: e2e
e2e: ## run only the end-to-end double-charge suite (real binaries built with failpoints)
	url=$$(scripts/ensure-postgres.sh); TEST_DATABASE_URL="$$url" go test -count=1 -race -run 'TestSuite' -v hubu.dev/hubu/e2e/

$(HARNESSES)/node_modules/.package-lock.json: $(HARNESSES)/package-lock.json
	cd $(HARNESSES) && npm ci --no-audit --no-fund --loglevel=error

# hubu.dev/hubu/e2e/... in PKGS covers e2e/interop too (so lint checks it), but its tests do
# nothing unless HUBU_INTEROP=1: only this target installs the harnesses they run.
.PHONY: interop
interop: $(HARNESSES)/node_modules/.package-lock.json ## the real-harness tests: Codex and Claude Code (pinned in e2e/interop/harnesses) through the real router and stack; make interop UPDATE=1 rewrites their support-matrix fixtures
	url=$$(scripts/ensure-postgres.sh); start=$$(date +%s); \
	TEST_DATABASE_URL="$$url" HUBU_INTEROP=1 HUBU_INTEROP_UPDATE="$${UPDATE:-}" go test -count=1 -timeout 15m -v hubu.dev/hubu/e2e/interop/; \
	echo "interop: $$(( $$(date +%s) - start ))s"
	if [ "$${UPDATE:-}" = 1 ]; then go run ./router/cmd/hubu-unified-mcp support-matrix router/testdata/meta/*.jsonl > docs/support-matrix.md; echo "interop: rewrote docs/support-matrix.md"; fi

.PHONY: chaos
chaos: ## the seeded fault explorer over the real binaries: make chaos [SEED=N] [RUNS=M] [PARALLEL=4] (a failing run prints its replay command)
	url=$$(scripts/ensure-postgres.sh); TEST_DATABASE_URL="$$url" HUBU_CHAOS_SEED="$${SEED:-$$(date +%s)}" HUBU_CHAOS_RUNS="$${RUNS:-20}" \
		go test -count=1 -timeout 0 -parallel "$${PARALLEL:-4}" -run '^TestChaos$$' -v hubu.dev/hubu/e2e/ | grep -E '^\s*(chaos|fault|indeterminate|replay|violation|seed|logs|---|ok|FAIL|PASS)|chaos_test.go'

.PHONY: bench
bench: ## run the benchmarks (not tests; numbers, no assertions)
	url=$$(scripts/ensure-postgres.sh); TEST_DATABASE_URL="$$url" go test -run '^$$' -bench . -benchtime 3s $(PKGS)

# Each variable, when set, overrides the program's default (go run ./e2e/cmd/hubu-loadtest --help lists them).
.PHONY: loadtest
loadtest: ## the load generator against a stack of its own, or with STACK=.hubu/stack.env through the one make up runs; figures beside their targets, fails only on a wrong spend: make loadtest [SCENARIOS=latency,hubu,sessions|path] [N=200] [SESSIONS=200] [SPENDS=10] [PATH_SPENDS=50] [CLIENTS=8] [AGENTS=16] [DURATION=10s] [RENDER_TIME=0s] [PROVIDER_IGNORES_KEYS=false] [SERVICE_PROCS=cores÷4] [STACK=FILE] [JSON=FILE] (docs/performance.md)
	url=$$(scripts/ensure-postgres.sh); HUBU_LOADTEST_DATABASE_URL="$$url" \
		HUBU_LOADTEST_SCENARIOS="$${SCENARIOS:-}" HUBU_LOADTEST_N="$${N:-}" HUBU_LOADTEST_SESSIONS="$${SESSIONS:-}" \
		HUBU_LOADTEST_SPENDS="$${SPENDS:-}" HUBU_LOADTEST_PATH_SPENDS="$${PATH_SPENDS:-}" HUBU_LOADTEST_CLIENTS="$${CLIENTS:-}" HUBU_LOADTEST_AGENTS="$${AGENTS:-}" \
		HUBU_LOADTEST_DURATION="$${DURATION:-}" HUBU_LOADTEST_RENDER_TIME="$${RENDER_TIME:-}" \
		HUBU_LOADTEST_PROVIDER_IGNORES_KEYS="$${PROVIDER_IGNORES_KEYS:-}" HUBU_LOADTEST_SERVICE_PROCS="$${SERVICE_PROCS:-}" HUBU_LOADTEST_JSON="$${JSON:-}" \
		HUBU_LOADTEST_STACK="$${STACK:-}" \
		go run ./e2e/cmd/hubu-loadtest

.PHONY: lint
lint: $(TOOLS)/staticcheck ## gofmt, go vet, staticcheck, go mod tidy leaving every module as it is, and no binary linking an API spec
	unformatted=$$(gofmt -l kit proto sql services router e2e); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go vet $(PKGS)
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go build -o /dev/null hubu.dev/hubu/router/... || { echo "the router no longer builds for windows"; exit 1; }
	$(TOOLS)/staticcheck $(PKGS)
	go vet -tags images hubu.dev/hubu/e2e/images/ && $(TOOLS)/staticcheck -tags images hubu.dev/hubu/e2e/images/ # only make images-test compiles it
	for m in $(MODULES) tools; do GOWORK=off go -C $$m mod tidy -diff || { echo "go mod tidy would change $$m: run it there and commit"; exit 1; }; done
	for m in $(MODULES); do GOWORK=off go -C $$m vet ./... || { echo "$$m does not build on its own (GOWORK=off)"; exit 1; }; done
	deps=$$(go list -deps hubu.dev/hubu/services/hubu/cmd/... hubu.dev/hubu/services/gongbu/cmd/... hubu.dev/hubu/services/mockflux/cmd/... hubu.dev/hubu/router/cmd/... hubu.dev/hubu/e2e/cmd/...); \
	linked=$$(grep -E '^github.com/getkin/kin-openapi|/proto/[a-z]+spec$$' <<<"$$deps" || true); \
	if [ -n "$$linked" ]; then echo "a binary links an OpenAPI spec or its parser (only tests may: proto/*spec):"; echo "$$linked"; exit 1; fi
