# daydream — build, test, demo.
#
#   make demo    replay the bundled real GPU trace: summary, replay table, timeline
#   make test    C++ tests (ctest) + Python tests (pytest)
#   make bench   benchmarks (docs/performance.md)
#   make test-asan   the C++ tests built with AddressSanitizer + UBSan (build/asan)
#   make fuzz    libFuzzer on the trace reader and Graph load, FUZZ_SECONDS each (default 300)
#   make replay-accuracy   replay every trace in ../shared/traces (docs/accuracy.md)
#   make accuracy   predictions against real CPU training runs (docs/accuracy.md, 12-20 min)
#
# On a fresh Debian machine these install what is missing: system packages with
# apt-get (sudo when not root), Python packages into .venv. Stamps in .stamps/
# keep re-runs fast.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMPS := .stamps
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

APT_PACKAGES := g++ make pkg-config libabsl-dev libprotobuf-dev protobuf-compiler libsimdjson-dev \
                zlib1g-dev libisal-dev catch2 libbenchmark-dev python3-venv
PY_BUILD_DEPS := scikit-build-core>=0.10 pybind11>=2.12 cmake>=3.18 ninja
# torch: the CPU build pip finds on local disk (capture tests train small models).
PY_TEST_DEPS := pytest>=7 torch==2.13.0 numpy

CPP_BUILD := build/cpp
CMAKE := $(VENV)/bin/cmake
SOURCES := $(shell find cpp proto python/src python/daydream -type f \( -name '*.cc' -o -name '*.h' -o -name '*.proto' -o -name '*.py' -o -name '*.pyi' \) 2>/dev/null) CMakeLists.txt pyproject.toml

.PHONY: demo test test-asan fuzz cpp-test py-test deps venv install bench replay-accuracy accuracy clean

# --- environment -------------------------------------------------------------
$(STAMPS)/apt: Makefile
	@mkdir -p $(STAMPS)
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:" $$missing; \
	  $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@touch $@

$(STAMPS)/venv: $(STAMPS)/apt Makefile
	@[ -x $(VPY) ] || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --disable-pip-version-check $(foreach p,$(PY_BUILD_DEPS) $(PY_TEST_DEPS),'$(p)') 2>&1 | grep -v "^WARNING: Location" || true
	@$(VPY) -c "import scikit_build_core, pybind11, pytest, torch, numpy" && touch $@

deps: $(STAMPS)/venv

# The Python package, editable, built by scikit-build-core into build/py/.
$(STAMPS)/install: $(STAMPS)/venv $(SOURCES)
	$(VPY) -m pip install -q --disable-pip-version-check --no-build-isolation -e . 2>&1 | grep -v "^WARNING: Location" || true
	@$(VPY) -c "import daydream._core" && touch $@

install: $(STAMPS)/install

# --- C++ ---------------------------------------------------------------------
$(CPP_BUILD)/build.ninja: $(STAMPS)/venv CMakeLists.txt
	$(CMAKE) -S . -B $(CPP_BUILD) -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja \
	  -DDAYDREAM_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo

cpp-test: $(CPP_BUILD)/build.ninja
	$(CMAKE) --build $(CPP_BUILD) -j $(JOBS)
	cd $(CPP_BUILD) && ../../$(VENV)/bin/ctest --output-on-failure -j $(JOBS)

# The library and its C++ tests under AddressSanitizer and UBSan (leaks
# included); any report fails the run.
ASAN_BUILD := build/asan

test-asan: $(STAMPS)/venv
	$(CMAKE) -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja \
	  -DDAYDREAM_BUILD_TESTS=ON -DDAYDREAM_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ../../$(VENV)/bin/ctest --output-on-failure -j $(JOBS)

# --- fuzzing -----------------------------------------------------------------
# libFuzzer (clang) with ASan + UBSan on tests/fuzz/*_fuzzer.cc. Seeds are
# windows of the bundled real traces (tests/fuzz/make_seeds.py) plus every
# input kept in tests/data/fuzz/; what the fuzzers find goes to
# build/fuzz/corpus/ (kept between runs) and crashes to build/fuzz/artifacts/.
# A crash fails the run: copy its input into tests/data/fuzz/<target>/, fix it,
# and the regression test (tests/cpp/fuzz_regression_test.cc) keeps it fixed.
FUZZ_BUILD := build/fuzz
FUZZ_SECONDS ?= 300
FUZZ_SEED_TRACES := examples/traces/resnet-v100-ddp1-rank0.pt.trace.json.gz $(wildcard tests/data/passes/*.json.gz)

$(STAMPS)/apt-clang: $(STAMPS)/apt
	@dpkg-query -W -f='$${Status}' clang-14 libclang-rt-14-dev 2>/dev/null | grep -c "install ok installed" | grep -q 2 || { \
	  $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev; }
	@touch $@

fuzz: $(STAMPS)/apt-clang | $(STAMPS)/install
	CC=clang-14 CXX=clang++-14 $(CMAKE) -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja \
	  -DDAYDREAM_FUZZ=ON -DDAYDREAM_BUILD_TESTS=OFF -DDAYDREAM_WITH_CUPTI=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	$(CMAKE) --build $(FUZZ_BUILD) -j $(JOBS) --target trace_fuzzer graph_fuzzer
	$(VPY) tests/fuzz/make_seeds.py $(FUZZ_BUILD)/seeds $(FUZZ_SEED_TRACES)
	@for t in trace graph; do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/artifacts/$$t; \
	  echo "== $${t}_fuzzer for $(FUZZ_SECONDS) s"; \
	  ASAN_OPTIONS=detect_leaks=1 $(FUZZ_BUILD)/$${t}_fuzzer $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/seeds/$$t tests/data/fuzz/$$t \
	    -dict=tests/fuzz/kineto.dict -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	    -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t/ 2>&1 | tee $(FUZZ_BUILD)/$${t}_fuzzer.log \
	    | grep -E "^(#[0-9]+\s+(INITED|DONE)|==[0-9]+==|SUMMARY|.*runtime error|stat::|artifact_prefix|Test unit written)" ; \
	done

# --- Python ------------------------------------------------------------------
# The fake libcuda/libcupti of the C++ tests lets tests/python/test_cupti.py
# run the CUPTI collector end to end without a GPU (where CUPTI's headers are).
FAKE_CUPTI := $(CPP_BUILD)/libdaydream_fake_cupti.so

py-test: $(STAMPS)/install $(CPP_BUILD)/build.ninja
	$(CMAKE) --build $(CPP_BUILD) --target daydream_fake_cupti >/dev/null 2>&1 || true
	DAYDREAM_REQUIRE_TORCH=1 DAYDREAM_FAKE_CUPTI_LIBRARY=$$([ -f $(FAKE_CUPTI) ] && echo $(abspath $(FAKE_CUPTI)) || true) \
	  $(VPY) -m pytest -q tests/python

test: cpp-test py-test

demo: $(STAMPS)/install
	@$(VPY) -m daydream.demo --out build/demo 2>&1 | grep -v "^USDT:"

bench: $(STAMPS)/venv
	PATH=$(abspath $(VENV))/bin:$$PATH bash benchmarks/run_bench.sh

replay-accuracy: $(STAMPS)/install
	$(VPY) benchmarks/replay_accuracy.py --traces ../shared/traces --doc docs/accuracy.md --json benchmarks/out/replay_accuracy.json

# Ground truth (issue 5): each optimization predicted from a captured baseline,
# then run for real. Options: ACCURACY_ARGS="--quick" for a smoke run.
# Then the two-process experiments again with gloo's threads at SCHED_FIFO
# (--comm-threads realtime: no scheduler-tick wake-ups; needs root or
# CAP_SYS_NICE, skipped with a message without; ACCURACY_REALTIME=0 skips it).
ACCURACY_REALTIME ?= 1
accuracy: $(STAMPS)/install
	$(VPY) benchmarks/accuracy/run.py --doc docs/accuracy.md --json benchmarks/accuracy/results.json $(ACCURACY_ARGS)
	@if [ "$(ACCURACY_REALTIME)" = 1 ]; then \
	  $(VPY) benchmarks/accuracy/run.py --experiments data_parallel,tensor_fusion,tensor_fusion_reverse \
	    --comm-threads realtime --doc docs/accuracy.md --json benchmarks/accuracy/results_realtime.json $(ACCURACY_ARGS); \
	  rc=$$?; if [ $$rc = 3 ]; then echo "make accuracy: the realtime rows were skipped (no permission for SCHED_FIFO)"; \
	  elif [ $$rc != 0 ]; then exit $$rc; fi; \
	fi

clean:
	rm -rf build $(STAMPS)
