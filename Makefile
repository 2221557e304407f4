# qflow quick start: `make run` and `make test` install missing Debian packages, build, run.
SHELL := /bin/bash
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

# Debian packages the build and the tests need (see docs/architecture.md); qemu-user lets
# models_ptq_ort run ONNX Runtime on an emulated AVX2 CPU (docs/testing-models.md);
# espeak-ng speaks the audio of models_vad_stream; dataset-fashion-mnist gives the example
# applications' test image (tests/apps); libboost-mpi-dev and openmpi-bin build QFLOW_MPI and
# give the distributed tests their mpirun (docs/distributed.md).
DEB_PACKAGES := cmake g++ make ccache pkg-config \
  libboost-dev libboost-graph-dev libboost-program-options-dev libboost-filesystem-dev \
  libprotobuf-dev protobuf-compiler libonnx-dev libeigen3-dev libtoml11-dev nlohmann-json3-dev doctest-dev \
  libonnx-testdata libstb-dev python3-numpy chromium qemu-user espeak-ng dataset-fashion-mnist \
  libboost-mpi-dev openmpi-bin

.PHONY: all deps bench-deps fuzz-deps configure build run test test-asan fuzz bench-accuracy bench-bpu bench-zoo clean

all: build

# What the benchmarks need on top: the training/peer framework and the datasets (the
# PP-OCR part also uses node and npm, skipped with a message when they are missing), and GNU
# time for the peak RSS of a process alone.
BENCH_PACKAGES := python3-torch python3-onnx python3-pil fonts-dejavu-core fonts-noto-cjk time

# What `make fuzz` needs on top: clang and its libFuzzer/sanitizer runtimes.
FUZZ_PACKAGES := clang libclang-rt-14-dev

# Installs only what is missing; a no-op when everything is present.
deps bench-deps fuzz-deps: PACKAGES = $(DEB_PACKAGES) $(if $(filter bench-deps,$@),$(BENCH_PACKAGES)) \
  $(if $(filter fuzz-deps,$@),$(FUZZ_PACKAGES))
deps bench-deps fuzz-deps:
	@missing=$$(for p in $(PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	  done); \
	if [ -n "$$missing" ]; then \
	  echo "installing missing packages:" $$missing; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

configure: deps
	@if [ ! -f $(BUILD_DIR)/CMakeCache.txt ]; then cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release; fi

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	./tools/quickstart.sh $(BUILD_DIR)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The whole test suite built with AddressSanitizer and UndefinedBehaviorSanitizer (any UB
# report is fatal); a separate build folder, not part of `make test`.
ASAN_BUILD_DIR ?= build-asan
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
test-asan: deps
	@if [ ! -f $(ASAN_BUILD_DIR)/CMakeCache.txt ]; then \
	  cmake -S . -B $(ASAN_BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DCMAKE_CXX_FLAGS="$(SANITIZE_FLAGS)" -DCMAKE_C_FLAGS="$(SANITIZE_FLAGS)" \
	    -DCMAKE_EXE_LINKER_FLAGS="$(SANITIZE_FLAGS)" -DCMAKE_SHARED_LINKER_FLAGS="$(SANITIZE_FLAGS)" \
	    -DCMAKE_MODULE_LINKER_FLAGS="$(SANITIZE_FLAGS)"; fi
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)
	cd $(ASAN_BUILD_DIR) && ASAN_OPTIONS=strict_string_checks=1:detect_stack_use_after_return=1 \
	  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

# libFuzzer targets of fuzz/ (docs/fuzzing.md), built with clang + ASan + UBSan in their own
# folder; each runs FUZZ_SECONDS from its committed seeds. Not part of `make test` (the
# seeds and crash inputs are replayed there by the fuzz.* tests).
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= onnx_import pipeline_toml calibration_table npy bc hbm
fuzz: fuzz-deps
	@if [ ! -f $(FUZZ_BUILD_DIR)/CMakeCache.txt ]; then \
	  CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD_DIR) -DQFLOW_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
	    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only"; fi
	cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS) --target $(addprefix qflow_fuzz_,$(FUZZ_TARGETS))
	./fuzz/run_fuzzers.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Top-1 / output-cosine of every calibration method vs float and vs PyTorch FX PTQ;
# rewrites docs/accuracy.md. Not part of `make test` (it takes minutes).
bench-accuracy: bench-deps build
	/usr/bin/python3 tools/bench_accuracy.py --build $(BUILD_DIR)

# bpu_ptq.toml on every platform: .hbm top-1 on the Fashion-MNIST test set, .hbm vs .bc
# bit-identity, PP-OCR placement and cosine on nash; rewrites docs/bpu-results.md.
bench-bpu: bench-deps build
	/usr/bin/python3 tools/bench_bpu.py --build $(BUILD_DIR)

# The model zoo (npm packages: Silero VAD, background removal) in qflow's interpreter against
# ONNX Runtime with made inputs and task metrics; rewrites docs/model-zoo.md (a few minutes).
bench-zoo: bench-deps build
	/usr/bin/python3 tools/bench_zoo.py --build $(BUILD_DIR)

# qflow's float interpreter vs ONNX Runtime side by side, the .bc simulator and .hbm runtime vs
# float, bpu_ptq.toml vs PyTorch FX PTQ; rewrites docs/performance.md. Not part of `make test`
# (about 20 min here; longer with the PP-OCR pipelines on their defaults). BENCH_ARGS goes to tools/bench_perf.py, e.g. "--quick --models fashion".
.PHONY: bench
bench: bench-deps build
	/usr/bin/python3 tools/bench_perf.py --build $(BUILD_DIR) $(BENCH_ARGS)

clean:
	rm -rf $(BUILD_DIR)
