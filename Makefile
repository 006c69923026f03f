# A thin wrapper over the CMake presets (CMakePresets.json). The two commands README promises:
#   make run    build the Release CLI and run the main job (a deterministic dummy model; no download)
#   make test   build Release and the sanitizer build (ASan + UBSan), run the whole test suite in both,
#               then the libFuzzer targets for FUZZ_SECONDS each (skipped with a note when there is no clang)
JOBS ?= $(shell nproc)
PROMPT ?= Once upon a time
MODEL ?= build/release/dummy.gguf

FUZZ_SECONDS ?= 25
CLANGXX := $(shell command -v clang++ 2>/dev/null || command -v clang++-14 2>/dev/null)
CLANGC := $(shell command -v clang 2>/dev/null || command -v clang-14 2>/dev/null)

.PHONY: all release asan run test test-release test-asan test-fuzz bench clean

all: release

release:
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

asan:
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)

build/release/dummy.gguf: release
	./build/release/mcullm dummy -o $@

run: release $(MODEL)
	./build/release/mcullm run -m $(MODEL) -p "$(PROMPT)" -n 128

test-release: release
	ctest --preset release

test-asan: asan
	ctest --preset asan

# The fuzz preset (clang, ASan + UBSan, libFuzzer); only the fuzz targets are built.
test-fuzz:
ifeq ($(CLANGXX),)
	@echo "test-fuzz: no clang++ (or clang++-14): the fuzzers are skipped (install clang-14 and libclang-rt-14-dev)"
else
	cmake --preset fuzz -DCMAKE_CXX_COMPILER=$(CLANGXX) -DCMAKE_C_COMPILER=$(CLANGC) -DMCULLM_FUZZ_SECONDS=$(FUZZ_SECONDS) >/dev/null
	cmake --build --preset fuzz --target fuzz_targets -j $(JOBS)
	ctest --preset fuzz
endif

test: test-release test-asan test-fuzz

bench: release
	./build/release/kernels_bench --benchmark_min_time=0.2

clean:
	rm -rf build
