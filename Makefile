# Entry points for building, testing and running runnerscaler. `make help` lists them.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# The Lambda binaries and the tests are built with a Go release that carries the
# standard-library security fixes the machine's Go 1.26.8 lacks; the go command
# fetches it from the module proxy once (~76 MB). go.mod still says go 1.26.
export GOTOOLCHAIN ?= go1.27.3

# Lambda architecture: arm64 (Graviton) by default, as the SAM template's parameter.
GOARCH ?= arm64
LAMBDA_FLAGS := -tags lambda.norpc -trimpath -ldflags='-s -w'
FUNCTIONS := webhook sweeper

.PHONY: help
help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-22s %s\n", $$1, $$2}'

.PHONY: deps
deps: local/dynalite/node_modules/.package-lock.json ## Install the local stack's npm packages (npm ci)

local/dynalite/node_modules/.package-lock.json: local/dynalite/package-lock.json
	npm ci --prefix local/dynalite --no-audit --no-fund

.PHONY: kube
kube: ## Build (or find cached) etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet
	@bash local/kube-build.sh

.PHONY: build
build: $(addprefix bin/,$(addsuffix /bootstrap,$(FUNCTIONS))) ## Build both Lambda bootstraps for linux/$(GOARCH) into bin/

bin/%/bootstrap: FORCE
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) go build $(LAMBDA_FLAGS) -o $@ ./functions/$*

# Targets `sam build` calls (BuildMethod: makefile): the bootstrap and the pools
# file, checked first as the sweeper checks it at start, so that a file it would
# refuse never reaches AWS.
POOLS_FILE ?= infra/pools.yaml
.PHONY: build-WebhookFunction build-SweeperFunction validate
validate: ## Check the pools file offline, every problem at once: make validate POOLS_FILE=path/to/pools.yaml
	@go run ./cmd/runnerscaler validate $(POOLS_FILE)
build-WebhookFunction: validate
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) go build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/webhook
	cp $(POOLS_FILE) $(ARTIFACTS_DIR)/pools.yaml
build-SweeperFunction: validate
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) go build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/sweeper
	cp $(POOLS_FILE) $(ARTIFACTS_DIR)/pools.yaml

.PHONY: test
test: deps kube ## Run every test against a fresh local stack (dynalite + kube-apiserver)
	@bash local/with-stack.sh go test -count=1 -timeout 30m ./...

.PHONY: bench
# make bench: BENCH selects the benchmarks (go test -bench), BENCH_COUNT how
# many runs of each (the comparison needs at least 2 to measure any noise; 3
# give the baseline's range at 75% confidence), BENCH_BASELINE what to compare with.
BENCH ?= .
BENCH_COUNT ?= 3
BENCH_BASELINE ?= tests/testdata/bench-baseline.txt

bench: deps kube ## Run the benchmarks on the local stack, print one table of their numbers and the changes beyond the noise since the baseline
	@mkdir -p .bench
	@bash local/with-stack.sh go test -run '^$$' -bench '$(BENCH)' -count $(BENCH_COUNT) -benchmem -timeout 180m ./... | tee .bench/latest.txt | go run ./local/cmd/benchtable -baseline $(BENCH_BASELINE)

.PHONY: bench-accept
bench-accept: ## Take the last make bench's output (.bench/latest.txt) as the baseline it compares with (under a preamble), and rewrite the figures the docs quote from it
	go run ./local/cmd/benchtable -accept .bench/latest.txt -baseline $(BENCH_BASELINE)
	go run ./local/cmd/benchtable -docs -baseline $(BENCH_BASELINE)

.PHONY: run
run: deps kube ## Bring up the local stack and keep it running (Ctrl-C stops it)
	@bash local/run.sh

.PHONY: chaos
chaos: deps kube ## The chaos suite at full size: 300 jobs through the closed loop on the node, with delivery, GitHub and node faults (a failing run keeps the loop's logs)
	@bash local/chaos.sh

.PHONY: invoke
FN ?= webhook
EVENT ?= local/events/webhook-queued.json
invoke: deps kube ## Run a real bootstrap under the Lambda emulator: make invoke FN=webhook|sweeper EVENT=local/events/<file>.json
	@go run ./local/cmd/invoke -fn $(FN) -event $(EVENT)

.PHONY: stack-up stack-down
stack-up: deps kube ## Start the local stack in .stack/ and leave it running
	@go run ./local/cmd/stack up
stack-down: ## Stop the local stack started by stack-up
	@go run ./local/cmd/stack down

.PHONY: verify
verify: ## gofmt, go vet, shellcheck, the check that the webhook binary does not link client-go, and that no build output is tracked
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt: files above need formatting'; exit 1; }
	go vet ./...
	shellcheck runner/entrypoint.sh runner/runner-job-started.sh runner/runner-job-completed.sh runner/runner-job-running local/*.sh .ci/run
	@bash local/check-deps.sh
	@bash local/check-source.sh

.PHONY: clean
clean: ## Remove build outputs and the local stack's state (not the Kubernetes cache)
	-@go run ./local/cmd/stack down
	rm -rf bin .stack .aws-sam

.PHONY: FORCE
FORCE:
