# A thin wrapper over the CMake presets (CMakePresets.json). The two commands README promises:
#   make run    build the Release CLI and run the main job (our committed story model; no download)
#   make test   build Release and the sanitizer build (ASan + UBSan), run the whole test suite in both,
#               then the libFuzzer targets for FUZZ_SECONDS each (skipped with a note when there is no clang)
JOBS ?= $(shell nproc)
PROMPT ?= Once upon a time
MODEL ?= models/tinystories-q4.gguf
# PyTorch and numpy come from Debian (python3-torch, python3-numpy): only the system interpreter has them.
PYTHON ?= /usr/bin/python3
TRAIN_DIR ?= build/train-default

FUZZ_SECONDS ?= 25
CLANGXX := $(shell command -v clang++ 2>/dev/null || command -v clang++-14 2>/dev/null)
CLANGC := $(shell command -v clang 2>/dev/null || command -v clang-14 2>/dev/null)

.PHONY: all release asan run test test-release test-asan test-fuzz bench clean train-default

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

# The default model's recipe (docs/models.md): BPE vocabulary, 4-bit QAT training with fixed seeds,
# export to f32 GGUF, packing to q4g64 by `mcullm convert`. One thread: 98 minutes on this shared machine
# with OpenBLAS (Debian libopenblas0-pthread), about 35 on one free core; hours with the reference BLAS.
train-default: release
	$(PYTHON) train/train.py --out $(TRAIN_DIR) --vocab 1024 --dim 128 --layers 4 --heads 4 --kv-heads 4 \
	  --hidden 384 --quant q4 --steps 2000 --warmup 100 --batch 16 --seq 320 --lr 3e-3 --seed 1 --threads 1 --eval-every 100
	./build/release/mcullm convert $(TRAIN_DIR)/model-f32.gguf -o $(TRAIN_DIR)/tinystories-q4.gguf --type q4g64
	@echo "train-default: wrote $(TRAIN_DIR)/tinystories-q4.gguf (copy it to models/ to make it the default)"

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
