# A thin wrapper over the CMake presets (CMakePresets.json). The two commands README promises:
#   make run    install the CLI's missing Debian packages (tools/install-deps.sh run), build the Release
#               CLI alone and run the main job (our committed story model; no download)
#   make test   install the suite's missing packages (tools/install-deps.sh test), build Release and the
#               sanitizer build (ASan + UBSan), run the whole test suite in both, then the libFuzzer
#               targets for FUZZ_SECONDS each (skipped with a note when there is no clang); after each
#               ctest run, tools/check_skips.py counts the skipped tests (with CI=true an unlisted skip fails)
JOBS ?= $(shell nproc)
PROMPT ?= Once upon a time
MODEL ?= models/tinystories-q4.gguf
# PyTorch and numpy come from Debian (python3-torch, python3-numpy): only the system interpreter has them.
PYTHON ?= /usr/bin/python3
TRAIN_DIR ?= build/train-default
QWEN2_DIR ?= build/train-qwen2

FUZZ_SECONDS ?= 25

DEPS := tools/install-deps.sh
# JUnit report of each ctest run (in its build directory), read by tools/check_skips.py.
JUNIT := ctest-junit.xml
CHECK_SKIPS = $(PYTHON) tools/check_skips.py --allow tests/allowed_skips.txt

.PHONY: all release asan cli run test test-release test-asan test-fuzz bench clean train-default train-qwen2 plots \
        deps-run deps-test deps-plots deps-train

all: release

# Only the packages a job lacks (one dpkg-query call when nothing is missing).
deps-run deps-test deps-plots deps-train:
	$(DEPS) $(@:deps-%=%)

release: deps-test
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

# The CLI alone (the tests and benchmarks are other targets of the same build directory).
cli: deps-run
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target mcullm

asan: deps-test
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)

build/release/dummy.gguf: cli
	./build/release/mcullm dummy -o $@

run: cli $(MODEL)
	./build/release/mcullm run -m $(MODEL) -p "$(PROMPT)" -n 128

# The default model's recipe (docs/models.md): BPE vocabulary, 4-bit QAT training with fixed seeds,
# export to f32 GGUF, packing to q4g64 by `mcullm convert`. One thread: 98 minutes on this shared machine
# with OpenBLAS (Debian libopenblas0-pthread), about 35 on one free core; hours with the reference BLAS.
# Interrupted: `make train-default RESUME=1` continues from $(TRAIN_DIR)/checkpoint.pt (written every 500
# steps) to the weights an unbroken run gives.
train-default: cli deps-train
	$(PYTHON) train/train.py --out $(TRAIN_DIR) --vocab 1024 --dim 128 --layers 4 --heads 4 --kv-heads 4 \
	  --hidden 384 --quant q4 --ffn relu --steps 2000 --warmup 100 --batch 16 --seq 320 --lr 3e-3 --seed 1 --threads 1 --eval-every 100 \
	  $(if $(RESUME),--resume)
	./build/release/mcullm convert $(TRAIN_DIR)/model-f32.gguf -o $(TRAIN_DIR)/tinystories-q4.gguf --type q4g64
	@echo "train-default: wrote $(TRAIN_DIR)/tinystories-q4.gguf (copy it to models/ to make it the default)"

# The cluster's model (docs/models.md, docs/cluster.md): a 12-layer ternary Qwen2 (q/k/v biases, GQA, NEOX
# RoPE, separate head; ternary QAT as the engine's i2_s path) on the same text, exported in f32 and
# ternarized by `mcullm convert --type i2_s` (the same absmean). One thread: about 55 minutes on this shared
# machine with OpenBLAS. `RESUME=1` continues from $(QWEN2_DIR)/checkpoint.pt (every 100 steps).
train-qwen2: cli deps-train
	$(PYTHON) train/train.py --out $(QWEN2_DIR) --arch qwen2 --quant ternary --untied --vocab 1024 --dim 128 \
	  --layers 12 --heads 4 --kv-heads 2 --hidden 256 --steps 1200 --warmup 100 --batch 16 --seq 256 --lr 3e-3 \
	  --seed 1 --threads 1 --eval-every 200 --checkpoint-every 100 $(if $(RESUME),--resume)
	./build/release/mcullm convert $(QWEN2_DIR)/model-f32.gguf -o $(QWEN2_DIR)/tinystories-qwen2-ternary.gguf --type i2_s --embd-type q8_0
	@echo "train-qwen2: wrote $(QWEN2_DIR)/tinystories-qwen2-ternary.gguf"

test-release: release
	ctest --preset release --output-junit $(JUNIT)
	$(CHECK_SKIPS) build/release/$(JUNIT)

test-asan: asan
	ctest --preset asan --output-junit $(JUNIT)
	$(CHECK_SKIPS) build/asan/$(JUNIT)

# The fuzz preset (clang, ASan + UBSan, libFuzzer); only the fuzz targets are built. clang is looked
# up when the recipe runs: deps-test may just have installed it.
test-fuzz: deps-test
	@cxx=$$(command -v clang++ || command -v clang++-14); cc=$$(command -v clang || command -v clang-14); \
	if [ -z "$$cxx" ]; then \
	  echo "test-fuzz: no clang++ (or clang++-14): the fuzzers are skipped (install clang-14 and libclang-rt-14-dev)"; \
	else \
	  set -e; \
	  cmake --preset fuzz -DCMAKE_CXX_COMPILER=$$cxx -DCMAKE_C_COMPILER=$$cc -DMCULLM_FUZZ_SECONDS=$(FUZZ_SECONDS) >/dev/null; \
	  cmake --build --preset fuzz --target fuzz_targets -j $(JOBS); \
	  ctest --preset fuzz --output-junit $(JUNIT); \
	  $(CHECK_SKIPS) build/fuzz/$(JUNIT); \
	fi

test: test-release test-asan test-fuzz

bench: release
	./build/release/kernels_bench --benchmark_min_time=0.2

# The figures of docs/img/ from the CSV / JSON the repo keeps (tools/plots.py; Debian's python3-matplotlib).
plots: deps-plots cli
	$(PYTHON) tools/plots.py --mcullm build/release/mcullm --out docs/img

clean:
	rm -rf build
