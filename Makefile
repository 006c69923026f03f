# A thin wrapper over the CMake presets (CMakePresets.json). The two commands README promises:
#   make run    build the Release CLI and run the main job (a deterministic dummy model; no download)
#   make test   build Release and the sanitizer build (ASan + UBSan), run the whole test suite in both
JOBS ?= $(shell nproc)
PROMPT ?= Once upon a time
MODEL ?= build/release/dummy.gguf

.PHONY: all release asan run test test-release test-asan bench clean

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

test: test-release test-asan

bench: release
	./build/release/kernels_bench --benchmark_min_time=0.2

clean:
	rm -rf build
