# driftless — see README.md. `make help` lists the targets.

SHELL := /usr/bin/env bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/driftless/driftless/internal/cli.version=$(VERSION) \
           -X github.com/driftless/driftless/internal/cli.commit=$(COMMIT)
# kustomize_disable_go_plugin_support leaves out Kustomize's Go plugin loader
# (driftless runs no Kustomize plugins): its import of "plugin" makes a cgo
# build link every method and export every symbol, 43 MB more binary and
# about 19 MiB more of it resident (docs/performance.md, round 3 memory).
TAGS := kustomize_disable_go_plugin_support
# STATIC: driftless is built static, as the image's binary is (the
# Dockerfile builds with CGO_ENABLED=0): `make build`, go vet, staticcheck,
# the bench, the helper binaries of hack/ and every test's build of the
# agent (testenv.BuildAgent) then share one compile of the agent's
# packages. A cgo build and a static one share none, and on a cold
# two-core machine a second compile of them costs about 4 minutes. The
# -race test binaries need cgo and are compiled apart in any case.
STATIC := CGO_ENABLED=0
TOOLS := $(GO) tool -modfile=hack/tools/go.mod
export DRIFTLESS_K8S_BIN := $(CURDIR)/bin/k8s

.PHONY: reliability soak fuzz help build generate controlplane sops local-kms promtool cosign examples test lint demo demo-images bench check-leftovers clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build bin/driftless
	$(STATIC) $(GO) build -tags $(TAGS) -ldflags "$(LDFLAGS)" -o bin/driftless ./cmd/driftless

generate: ## regenerate deepcopy (api/v1alpha1) and CRDs (config/crd/bases) from api markers
	$(TOOLS) controller-gen object paths=./api/...
	$(TOOLS) controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd/bases

controlplane: ## build etcd, kube-apiserver, controller-manager, scheduler, kubectl and kwok into bin/k8s (cached)
	hack/controlplane/build.sh

sops: ## build the reference sops CLI into bin/tools/sops (cached), for the interop tests of internal/secrets
	@test -x bin/tools/sops || GOBIN=$(CURDIR)/bin/tools $(GO) install github.com/getsops/sops/v3/cmd/sops@v3.13.3

local-kms: ## build the AWS KMS emulator local-kms into bin/tools/local-kms (cached), for the AWS KMS tests of SOPS decryption
	@test -x bin/tools/local-kms || GOBIN=$(CURDIR)/bin/tools $(GO) install github.com/nsmithuk/local-kms@v0.0.0-20260228092603-2a5e92d09ab6

promtool: ## build promtool (prometheus v0.316.0) into bin/tools/promtool (cached), for the alert rule tests of config/monitoring
	@test -x bin/tools/promtool || GOBIN=$(CURDIR)/bin/tools $(GO) install github.com/prometheus/prometheus/cmd/promtool@v0.316.0

cosign: ## build the cosign CLI (sigstore/cosign v2.6.5) into bin/tools/cosign (cached), for the tests of artifacts signed with cosign (docs/sources.md)
	@test -x bin/tools/cosign || GOBIN=$(CURDIR)/bin/tools $(GO) install github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5

examples: ## download the public example repositories the tests sync (hack/examples/go.mod pins them) into the Go module cache (cached)
	cd hack/examples && $(GO) mod download github.com/stefanprodan/podinfo

test: controlplane sops local-kms promtool cosign examples ## run every test, unit and against a real control plane
	$(GO) test -race -count=1 -timeout 30m ./...

reliability: controlplane ## run the whole reliability suite (bad-input corpus, agent killed mid-sync, API server and etcd crashes with 30 s outages, git down 5 minutes, two agents, force-push); COUNT=n repeats it; docs/reliability.md
	RELIABILITY_FULL=1 RELIABILITY_GIT_OUTAGE=5m $(GO) test -race -count=$(or $(COUNT),1) -timeout 60m -v ./internal/reliability/

SOAK ?= 30m
soak: controlplane ## the soak: 5,000 objects over 100 Syncs, a commit every 10 s and a hand edit every second for SOAK (default 30m; SOAK=2m for a quick run); not in CI; docs/reliability.md
	SOAK=$(SOAK) $(GO) test -count=1 -timeout 24h -run '^TestSoak$$' -v ./internal/reliability/

FUZZTIME ?= 30s
fuzz: ## run every fuzz target for FUZZTIME each (default 30s; their seed corpora also run in make test); docs/reliability.md
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$target"; $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

lint: ## gofmt, go vet, staticcheck
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(STATIC) $(GO) vet ./...
	$(STATIC) $(TOOLS) staticcheck ./...

demo: controlplane build ## run the demo on a local control plane
	hack/demo.sh

demo-images: controlplane build ## run the image automation demo: a new tag in a loopback registry becomes a commit, then runs (docs/image-automation.md)
	hack/demo-images.sh

bench: controlplane ## measure against the performance targets in docs/performance.md: 1,000 objects, or 100/1,000/5,000/10,000 with FULL=1
	$(STATIC) $(GO) run ./bench $(if $(FULL),-full) $(BENCHFLAGS)

check-leftovers: ## fail if a process started from this checkout (demo, tests, bench, local cluster) is still running
	hack/check-no-leftovers.sh

clean: ## stop the local cluster and remove build outputs (keeps bin/k8s)
	-hack/local-cluster.sh down
	rm -rf .local bin/driftless bin/localcluster bin/registry
