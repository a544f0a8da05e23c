# isle — build, test and benchmark targets. `make help` lists them.
SHELL := /bin/bash
GO ?= go
export PATH := /usr/local/go/bin:$(PATH)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# The commit's time: a board's clock is never set before it (package clock).
COMMIT_TIME ?= $(shell git log -1 --format=%cI 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X github.com/isle-cluster/isle/hw/clock.commitTime=$(COMMIT_TIME)
OUT     ?= out
# gRPC (containerd's client) without its request tracing: that package
# (golang.org/x/net/trace) renders HTML pages with html/template, and the
# template engine's calls of methods by name keep every exported method of
# every type in the binary. Without it the arm64 binary is 34.6 MB, not 42.5.
export GOFLAGS := -tags=grpcnotrace
# The design's limit on the static arm64 binary: `make cross` fails beyond it.
MAX_ARM64_BYTES := 40000000
# Packages whose code runs once per request, change or command, never in a
# loop of its own (validation, tables, OpenAPI documents, CRD schemas,
# cluster set-up, backups, certificates, quota admission, authorization,
# joining, islands, images, the command line; a pod's containers, volumes
# and network set up, probes, the Service rules programmed on a change,
# the floating address, the board's facts and LEDs, the controllers'
# reconciles but not their shared loop and caches, kit): compiled without
# inlining, which keeps about 790 KB out of the arm64 binary.
COLD_CONTROLLERS := caexpiry cronjob csrsigning daemonset deployment endpoints endpointslice hpa job nodelifecycle rootca sasecrets statefulset volumes
COLD_PKGS := control/strategy control/printers control/openapi control/crd control/cluster control/backup control/pki control/quota control/authz node/bootstrap node/island images/... cmd/... \
	node/containers node/volumes node/podnet node/probe node/proxy node/vip hw hw/led $(addprefix control/controllers/,$(COLD_CONTROLLERS))
GCFLAGS   := $(foreach p,$(COLD_PKGS),-gcflags=github.com/isle-cluster/isle/$(p)=-l)

# Packages whose tests run with the race detector (everything with
# goroutines): ./raft/... ./control/... ./node/..., in test-unit.
# Unit tests (no built binary needed): everything but e2e.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /e2e)

APT_PACKAGES := etcd-server qemu-user-static iproute2 containerd runc docker-registry busybox-static file nftables jq curl dosfstools mtools fdisk e2fsprogs mmdebstrap arch-test qemu-system-arm ipxe-qemu chromium fonts-wqy-zenhei

.PHONY: help build cross setup test test-unit test-e2e test-e2e-race test-conformance conformance test-raspi test-arm test-long bench-store bench-api bench-membership bench-scheduler bench-map bench-scale bench-agent bench-network bench-traffic bench-image bench-day2 demo demo-down image lint clean

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

build: ## build isle for this machine into out/isle
	CGO_ENABLED=0 $(GO) build -trimpath $(GCFLAGS) -ldflags '$(LDFLAGS)' -o $(OUT)/isle ./cmd/isle

cross: ## static, stripped ARM builds (arm64, armv7, armv6) with their sizes
	@mkdir -p $(OUT)
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath $(GCFLAGS) -ldflags '$(LDFLAGS)' -o $(OUT)/isle-linux-arm64 ./cmd/isle
	CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7 $(GO) build -trimpath $(GCFLAGS) -ldflags '$(LDFLAGS)' -o $(OUT)/isle-linux-armv7 ./cmd/isle
	CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=6 $(GO) build -trimpath $(GCFLAGS) -ldflags '$(LDFLAGS)' -o $(OUT)/isle-linux-armv6 ./cmd/isle
	@for f in $(OUT)/isle-linux-*; do printf '%-28s %6.1f MiB (%d bytes)\n' $$f $$(echo "scale=1; $$(stat -c %s $$f)/1048576" | bc) $$(stat -c %s $$f); done
	@size=$$(stat -c %s $(OUT)/isle-linux-arm64); if [ $$size -gt $(MAX_ARM64_BYTES) ]; then \
		echo "cross: $(OUT)/isle-linux-arm64 is $$size bytes, over the limit of $(MAX_ARM64_BYTES)" >&2; exit 1; fi

BOARD ?= rpi4
ROLE ?= agent

image: setup build cross ## an SD-card image (BOARD=rpi3|rpi4|zero2w ROLE=agent|server): out/isle-BOARD-ROLE.img and .img.zst; as root; about 6 min the first time, seconds after
	$(OUT)/isle image build --board $(BOARD) --role $(ROLE) --isle $(OUT)/isle-linux-arm64 --out $(OUT)/isle-$(BOARD)-$(ROLE).img

setup: ## install what builds and tests need (idempotent; Debian, as root)
	@missing=""; for p in $(APT_PACKAGES) bc; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "setup: installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "setup: apt packages present"; fi
	$(GO) mod download

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd e2e/incluster && $(GO) vet ./...

test: setup lint test-unit test-e2e test-e2e-race test-conformance ## all tests this machine can run (as root: tmpfs, real processes); installs what they need

# The node packages (containerd, runc, namespaces) run apart from the
# control plane's: on two CPUs they starved the controllers' timed tests.
test-unit:
	$(GO) test -count=1 -race ./raft/... ./control/...
	$(GO) test -count=1 -race ./node/...
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -e /e2e -e /raft -e /control -e /node)

# The pod, Pod network and Service traffic tests run once, in
# test-e2e-race, against an isle built with the race detector (the same
# code, instrumented); test-e2e runs every other whole-binary test.
E2E_RACE_TESTS := TestHelloPod|TestPodLifecycle|TestPodSpecs|TestAgentRestart|TestPodNetwork|TestServiceTraffic

test-e2e: build ## whole-binary tests against out/isle (the pod and traffic tests are test-e2e-race's)
	ISLE_BIN=$(CURDIR)/$(OUT)/isle $(GO) test -count=1 -timeout 40m -skip '^($(E2E_RACE_TESTS))$$' ./e2e/...

test-raspi: build ## only the SD-card image on QEMU's Pi 3 (-M raspi3b), its LED on GPIO17 (also in test-e2e)
	ISLE_BIN=$(CURDIR)/$(OUT)/isle $(GO) test -count=1 -timeout 30m -run 'TestImageBootsOnRaspi3b' -v ./e2e/...

# The pod, Pod network and Service traffic tests, against an isle built
# with the race detector that exits at the first race: the agent's
# goroutines under real traffic.
test-e2e-race: ## the pod and traffic tests against an isle built with the race detector
	$(GO) build -race -o $(OUT)/isle-race ./cmd/isle
	GORACE=halt_on_error=1 ISLE_BIN=$(CURDIR)/$(OUT)/isle-race $(GO) test -count=1 -timeout 25m -run '^($(E2E_RACE_TESTS))$$' ./e2e/...

# Upstream's conformance suite (e2e/conformance). Its build, the Debian
# root of the test images and the reports are kept in CONFORMANCE_CACHE.
CONFORMANCE_CACHE ?= /var/cache/isle-conformance

test-conformance: build ## the conformance specs isle passes (e2e/conformance/subset.txt) on an island: fails if one does not pass
	$(GO) run ./e2e/conformance -isle $(OUT)/isle -cache $(CONFORMANCE_CACHE) -subset e2e/conformance/subset.txt -nodes 3

conformance: setup build ## upstream's whole conformance suite on an island (3 servers, 2 agents; about 1.5 h): JUnit reports, a summary, docs/conformance.md updated (ARCH=amd64|arm64|arm/v7 NODES=6)
	$(GO) run ./e2e/conformance -isle $(OUT)/isle -cache $(CONFORMANCE_CACHE) -doc docs/conformance.md -arch $(or $(ARCH),amd64) -nodes $(or $(NODES),6)

# One package at a time (-p 1): emulated, two packages of controller tests
# on two cores starve each other past the tests' deadlines. Every unit test
# runs on arm64 and on armv6, the strictest 32-bit target (its alignment
# rules and atomics are armv7's, without the newer instructions); armv7
# differs only in the floating-point and barrier instructions the compiler
# picks, and `make cross` builds it (its test binaries built and started
# here cost CI two and a half minutes of its sixty).
test-arm: ## unit tests under qemu-user: arm64 and armv6 (armv7 is built by make cross)
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) test -p 1 -count=1 -exec qemu-aarch64-static $(UNIT_PKGS)
	CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=6 $(GO) test -p 1 -count=1 -exec qemu-arm-static $(UNIT_PKGS)

test-long: ## the linearizability checker over many more seeds
	ISLE_LONG_SEEDS=200 $(GO) test -count=1 -race -timeout 60m -run Linearizable ./raft/

bench-store: setup build ## isle vs etcd: 3 members each on loopback, 1/16/64 writers, idle writes
	$(GO) run ./e2e/bench/store -isle $(OUT)/isle

bench-membership: setup build ## ten boards on loopback: kill -9 to NotReady, idle disk writes, gossip traffic (IDLE=10m TRIALS=20)
	$(GO) run ./e2e/bench/membership -isle $(OUT)/isle -idle $(or $(IDLE),10m) -trials $(or $(TRIALS),20)

bench-day2: setup build ## an island of 3 servers and 2 agents with the hello app: cold power-on (median of COLD=5), agents' memory with every server down (DOWN=10m), failed requests in a rolling upgrade
	$(GO) run ./e2e/bench/day2 -isle $(OUT)/isle -cold $(or $(COLD),5) -down $(or $(DOWN),10m)

bench-agent: setup build ## an island of a server and an agent board: pod start latency (bound to Running) over 50 pods on the agent, its RSS and idle CPU with them
	$(GO) run ./e2e/bench/agent -isle $(OUT)/isle -pods $(or $(PODS),50) -idle $(or $(IDLE),1m)

bench-network: setup build ## an island of 3 servers and 2 agents: isle up time, TCP throughput and round trips pod to pod against board to board (TRIALS=5 DURATION=5s)
	$(GO) run ./e2e/bench/network -isle $(OUT)/isle -trials $(or $(TRIALS),5) -duration $(or $(DURATION),5s)

bench-traffic: setup build ## an island of a server and 2 agents: HTTP req/s and p99 to a pod through its ClusterIP and the Ingress against its pod IP, DNS queries/s, Service rule updates (TRIALS=5 DURATION=5s CONNS=16)
	$(GO) run ./e2e/bench/traffic -isle $(OUT)/isle -trials $(or $(TRIALS),5) -duration $(or $(DURATION),5s) -conns $(or $(CONNS),16)

bench-image: setup build cross ## SD-card image: build time from scratch and cached, compressed size, boot to Node Ready under QEMU -M virt, isle's RSS in the VM with one pod (TRIALS=3 SCRATCH=1)
	$(GO) run ./e2e/bench/image -isle $(OUT)/isle -arm64 $(OUT)/isle-linux-arm64 -trials $(or $(TRIALS),3) -scratch=$(if $(filter 0,$(SCRATCH)),false,true)

bench-api: setup build ## one isle server over HTTPS: Pod creates, GETs, kubectl's LISTs (Table), server RSS
	$(GO) run ./e2e/bench/api -isle $(OUT)/isle

bench-scheduler: setup build ## one isle server: 5,000 pending Pods placed on 100 Nodes, a 100-replica Deployment bound, raft writes per Pod
	$(GO) run ./e2e/bench/scheduler -isle $(OUT)/isle

bench-map: setup build ## the island's map in headless Chromium, one isle server: API change → page updated (p50/p99), frame time while 100 pods change, the page's memory, the server's memory and CPU per open map (BOARDS=50 PODS=1000 MAPS=5)
	$(GO) run ./e2e/bench/map -isle $(OUT)/isle -boards $(or $(BOARDS),50) -pods $(or $(PODS),1000) -maps $(or $(MAPS),5)

# bench-scale's sizes, BOARDS:PODS; SCALEFLAGS: more flags (-cpuprofile FILE -memprofile FILE: the hollow process's profiles; -serverheaps DIR: each server's heap profile after each size).
STEPS ?= 10:300,50:1000,100:2000,250:5000
bench-scale: setup build ## three isle servers and hollow boards on loopback, grown 10/50/100/250 boards with 300/1,000/2,000/5,000 pods: API latencies, scheduling, servers' memory and CPU, bytes written per pod, gossip per board, board kill → NotReady, leader failover (STEPS=10:300,...)
	$(GO) run ./e2e/bench/scale -isle $(OUT)/isle -steps $(STEPS) $(SCALEFLAGS)

demo: setup build ## a whole cluster on this machine (isle up: 3 servers, 2 agents), the hello app spread over it; installs what it needs
	./deploy/demo.sh start

demo-down: ## remove the demo's island (isle down)
	./deploy/demo.sh stop

clean:
	rm -rf $(OUT)
