# The two commands a newcomer needs: `make run` and `make test`. Everything else is here too.
SHELL := /bin/bash
BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
PORT ?= 8443
PROBE_PORT ?= 8080
CERT_DIR ?= $(BUILD)/certs

# Debian packages the build and the tests need; `make deps` installs the missing ones as root.
BUILD_PACKAGES := g++ cmake make pkg-config libcpp-httplib-dev libssl-dev rapidjson-dev \
                  libcxxopts-dev doctest-dev openssl curl python3 python3-yaml lua5.1 \
                  prometheus
BENCH_PACKAGES := wrk nginx-light
FUZZ_PACKAGES := clang libclang-rt-14-dev

.PHONY: all deps build certs run test test-unit test-cluster cluster-up cluster-down upstream upstream-matrix bench-cluster test-sanitize sanitize-build sanitize-compile sanitize-one sanitize-test bench bench-loop bench-first-sync bench-first-sync-apiserver soak fuzz demo chart-test format clean image release

all: build

deps:
	@tests/install-deps.sh $(BUILD_PACKAGES)

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

certs: deps
	@certs/gen-dev-certs.sh $(CERT_DIR) >/dev/null

# The product doing its job (as root): the project's real cluster, the chart installed, a Deployment updated in
# place with its hook, what changed, then the cluster stays up with commands to try until Ctrl-C
# (cluster/run-demo.sh). Where the cluster cannot run it says why and serves the webhook alone on loopback.
run: build certs
	@cluster/run-demo.sh $(BUILD) $(CERT_DIR) $(PORT) $(PROBE_PORT)

# Everything: the ctest suites (unit, curl, server edges, chart, the API client), then the real-cluster suite on
# the version matrix (tests/cluster/matrix.sh: v1.37 in two shards, v1.30, v1.33, and a v1.33 control plane with a
# v1.30 node, side by side), which ends with one "real cluster: kubernetes ..., N scenarios passed, M failed" line
# per configuration.
test: test-unit test-cluster

# The e2e scenarios on the Python API double are left to test-sanitize (they drive the ASan/TSan binaries): the
# real-cluster suite runs the same scenarios on upstream Kubernetes. Two suites at a time (`hostile`, which measures
# memory and connections, runs alone): the release build compiles beside the others.
test-unit: build certs
	@cd $(BUILD) && ctest --output-on-failure --timeout 900 -j 2 -LE '^e2e$$'

# The pinned upstream components (cluster/upstream/*/go.mod), built once into $$INPLACE_CACHE
# (default /var/cache/inplace-webhook) and reused while their go.mod/go.sum do not change. upstream-matrix adds the
# older releases of the version matrix (kubernetes-1.30, kubernetes-1.33); cluster/up.sh builds any release it is
# asked for on first use.
upstream:
	@cluster/deps.sh
	@cluster/upstream/build.sh

upstream-matrix: upstream
	@cluster/upstream/build.sh kubernetes-1.33 kubernetes-1.30

# MATRIX=newest runs only v1.37 (both shards), MATRIX=older only the older configurations.
MATRIX ?= all
test-cluster: build certs upstream-matrix
	@tests/cluster/matrix.sh $(BUILD) $(MATRIX)

# A real cluster to try things on (as root): `make cluster-up`, then the printed `export` line, then kubectl/helm.
cluster-up: build upstream
	@cluster/start.sh $(BUILD)

cluster-down:
	@cluster/down.sh

# ASan+UBSan, then TSan (the server's and the loop's threads), each in its own build directory, with
# only the suites that run our threads or parse input: unit, the API client (its HTTP, TLS and
# watch-stream code), curl, server edges, end-to-end, and under ASan the fuzz regressions too.
# -g, assertions on (the optimisation level per sanitizer below). Any sanitizer report
# fails the run, even from a process whose test passed (CMakeLists.txt sends ASan/TSan reports to
# $(BUILD)/sanitizer-reports; UBSan's go to the process's stderr, which the harnesses scan).
# ASan+UBSan at -O0: it compiles in half the time of -O1 (its whole build is the longest compile of a CI run) and
# checks the unoptimised code, where no optimisation hides a read; TSan at -O1, which it needs to run at a usable
# speed.
SANITIZE_OPT_address := -O0
SANITIZE_OPT_thread := -O1
SANITIZE_TARGETS_address := all
SANITIZE_TESTS_address := ^(unit|client|curl_cases|server_edges|e2e|fuzz_regressions_.*)$$
SANITIZE_TARGETS_thread := inplace-webhook unit_tests client_tests
SANITIZE_TESTS_thread := ^(unit|client|curl_cases|server_edges|e2e)$$
# The two builds one after the other (each takes both cores), then the two test runs side by side: their
# longest suite, e2e, waits on the API double's timing more than it computes, so together they take little
# longer than one, and each runs two of its scenarios at a time (IW_E2E_JOBS). Each run's output is printed
# whole when both have ended; either failing fails the target.
test-sanitize: deps
	@$(MAKE) --no-print-directory BUILD=build-asan SANITIZER=address sanitize-compile
	@$(MAKE) --no-print-directory BUILD=build-tsan SANITIZER=thread sanitize-compile
	@mkdir -p build-asan build-tsan; \
	  $(MAKE) --no-print-directory BUILD=build-asan SANITIZER=address sanitize-test >build-asan/sanitize.log 2>&1 & a=$$!; \
	  $(MAKE) --no-print-directory BUILD=build-tsan SANITIZER=thread sanitize-test >build-tsan/sanitize.log 2>&1 & t=$$!; \
	  rc=0; wait $$a || rc=1; wait $$t || rc=1; \
	  cat build-asan/sanitize.log build-tsan/sanitize.log; exit $$rc

# The two sanitizer builds alone, no test (needs `make deps` first): to compile them beside `make test`, at the
# lowest CPU priority, so that test-sanitize then finds both built.
sanitize-build:
	@$(MAKE) --no-print-directory BUILD=build-asan SANITIZER=address sanitize-compile
	@$(MAKE) --no-print-directory BUILD=build-tsan SANITIZER=thread sanitize-compile

sanitize-compile:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g $(SANITIZE_OPT_$(SANITIZER))" \
	  -DIW_SANITIZE=$(SANITIZER) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target $(SANITIZE_TARGETS_$(SANITIZER))

# One sanitizer's build and tests (BUILD=build-asan SANITIZER=address, or build-tsan and thread).
sanitize-one: sanitize-compile sanitize-test

sanitize-test:
	@echo "== -fsanitize=$(SANITIZER) in $(BUILD)"
	@rm -rf $(BUILD)/sanitizer-reports && mkdir -p $(BUILD)/sanitizer-reports
	@cd $(BUILD) && { IW_E2E_JOBS=2 ctest --output-on-failure -R '$(SANITIZE_TESTS_$(SANITIZER))'; rc=$$?; \
	  for f in sanitizer-reports/*; do \
	    [ -e "$$f" ] || continue; rc=1; echo "--- sanitizer report $(BUILD)/$$f:"; cat "$$f"; \
	  done; exit $$rc; }

# The product image without Docker: localhost/inplace-webhook:<the chart's appVersion>, FROM scratch (the stripped
# Release binary, the libraries ldd lists, uid 65532), as an OCI archive for `ctr -n k8s.io images import`.
# The last line printed is the archive's path, build-release/images/inplace-webhook-<version>.tar.
image: deps
	@cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build-release -j $(JOBS) --target inplace-webhook
	@cluster/images/product.sh build-release/inplace-webhook build-release/images

# The release artifacts of the VERSION file's version (README "Releasing"): the packaged chart, the image archive, the
# kubectl plugin's krew archive and manifest, SHA256SUMS, into build-release/release/VERSION/ (printed last).
release: deps
	@release/release.sh

BENCH_SECONDS ?= 10
bench: deps
	@tests/install-deps.sh $(BENCH_PACKAGES)
	@cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build-release -j $(JOBS) --target inplace-webhook
	@certs/gen-dev-certs.sh build-release/certs >/dev/null
	@python3 tests/bench/bench.py build-release/inplace-webhook . build-release/certs build-release/bench --seconds $(BENCH_SECONDS)

SOAK_MINUTES ?= 10
soak: deps
	@tests/install-deps.sh $(BENCH_PACKAGES)
	@cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build-release -j $(JOBS) --target inplace-webhook
	@python3 tests/bench/soak.py build-release/inplace-webhook . build-release/soak --minutes $(SOAK_MINUTES)

# The in-place update of a 1,000-pod Deployment (default drain, then the drain off) next to a native rolling update,
# on the real control plane with simulated nodes (as root); it prints the table README "Performance" shows (and
# writes it to build-release/cluster-bench.md; ctest readme_tables checks the two agree). BENCH_CLUSTER_ARGS passes options to
# tests/bench/cluster_bench.py: `--scale-up-during 50` scales the Deployment up by 50 (scale subresource) during the
# in-place update and reports each new pod's time from creation to its readiness gate True (p50, p99, max);
# `--skip-native` and `--skip-no-drain` leave out those cases; `--replicas N`.
BENCH_CLUSTER_ARGS ?=
bench-cluster: upstream
	@cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build-release -j $(JOBS) --target inplace-webhook
	@tests/bench/cluster_bench.sh build-release $(BENCH_CLUSTER_ARGS)

bench-loop: deps
	@cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build-release -j $(JOBS) --target inplace-webhook
	@certs/gen-dev-certs.sh build-release/certs >/dev/null
	@python3 tests/bench/loop_bench.py build-release/inplace-webhook . build-release/certs build-release/bench-loop

# The loop's first sync in a big cluster (20,000 ReplicaSets, 10,000 opted-in pods, 4,000 Deployments) served by a
# fixture API server (tests/bench/first_sync_bench.py): peak RSS and time; fails above BENCH_FIRST_SYNC_MAX_MIB.
BENCH_FIRST_SYNC_MAX_MIB ?= 160
bench-first-sync: deps
	@cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build-release -j $(JOBS) --target inplace-webhook
	@certs/gen-dev-certs.sh build-release/certs >/dev/null
	@python3 tests/bench/first_sync_bench.py build-release/inplace-webhook build-release/certs \
	  build-release/bench-first-sync --max-peak-mib $(BENCH_FIRST_SYNC_MAX_MIB)

# The same first sync against the pinned kube-apiserver and etcd (started on 127.0.0.1, no controllers).
bench-first-sync-apiserver: deps
	@cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build-release -j $(JOBS) --target inplace-webhook
	@certs/gen-dev-certs.sh build-release/certs >/dev/null
	@python3 tests/bench/first_sync_apiserver.py build-release/inplace-webhook . build-release/certs \
	  build-release/bench-first-sync-apiserver --max-peak-mib $(BENCH_FIRST_SYNC_MAX_MIB)

demo: build certs
	@python3 tests/e2e/demo.py $(BUILD)/inplace-webhook --certs $(CERT_DIR)

FUZZ_SECONDS ?= 60
fuzz: deps
	@tests/install-deps.sh $(FUZZ_PACKAGES)
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -DIW_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_review fuzz_json_patch fuzz_http
	@tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

chart-test:
	@tests/chart/helm-test.sh

format:
	@clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD) build-*
