#!/usr/bin/env bash
# Every test: install what is missing, fetch the test models, check the format of the C/C++ lines
# changed since HEAD~1, build (Release, build/), run ctest with the real model required (a missing
# model fails instead of skipping), then the bindings' tests.
# The suite runs on SmolLM2 (smollm2-135m, exported as CBL_MODEL), not on the product's default
# model; the qwen2 tests use qwen2.5-coder-0.5b (exported as CBL_QWEN_MODEL).
#   bash scripts/test.sh              Release suite
#   bash scripts/test.sh --sanitize   also build with address,undefined sanitizers in build-asan
#                                     (mimalloc off there) and run the whole suite again, then
#                                     build the threading tests with ThreadSanitizer in build-tsan
#                                     (8 threads sharing one runtime; FAISS single-threaded there)
#                                     and the CUDA ops on the emulator with it (build-emu-tsan)
# CBL_TEST_JOBS sets ctest's parallelism (default 2); extra ctest arguments go after `--`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

sanitize=0
ctest_extra=()
while (($#)); do
  case "$1" in
    --sanitize) sanitize=1 ;;
    --) shift; ctest_extra=("$@"); break ;;
    *) echo "test: error: unknown argument $1 (use --sanitize, or -- ctest args)" >&2; exit 2 ;;
  esac
  shift
done

phase() { echo "== test: $* (${SECONDS}s)" >&2; }

phase "dependencies"
bash scripts/install-deps.sh
model=$(bash scripts/fetch-model.sh smollm2-135m)
qwen_model=$(bash scripts/fetch-model.sh qwen2.5-coder-0.5b)
embed_model=$(bash scripts/fetch-embedder.sh)
# SmolLM2 for most tests (fast); Qwen2.5-Coder-0.5B for the qwen2 path (K-quant and q5_0 kernels,
# untied output, the llama.cpp parity test). Qwen2.5-Coder-1.5B's parity case runs only when the
# caller sets CBL_QWEN15_MODEL (about 7 minutes).
export CBL_MODEL="$model" CBL_QWEN_MODEL="$qwen_model" CBL_EMBED_MODEL="$embed_model" CBL_REQUIRE_MODEL=1

run_ctest() {
  ctest --test-dir "$1" --output-on-failure --no-tests=error -j "${CBL_TEST_JOBS:-2}" "${ctest_extra[@]}"
}

phase "format of the changed C/C++ lines (scripts/check-format.sh, since HEAD~1)"
bash scripts/check-format.sh

phase "build (Release, build/)"
bash scripts/build.sh
phase "ctest (Release)"
run_ctest build

# ---- CUDA backend (kernels/cuda): where nvcc is installed, prove the CUDA code compiles and ----
# links (build-cuda/: the library and the backend tests only), then run test_backend_ops, which skips
# (exit 77) without a GPU, as does test_cuda_model (whole models against the CPU; scripts/gpu-check.sh
# runs both on a GPU), test_cuda_backend_errors (a missing device is a clean status) and
# test_backend_registry (no GPU: 0 CUDA devices listed, as nvidia-smi says, and "cuda:0" a clear
# CBL_DEVICE error with the CUDA runtime's reason), and test_capi_session_device (the build answers
# through the C ABI on the CPU; "cuda:0" is that error, or on a GPU the CPU's answer).
# The device math is tested on the host by every build (test_cuda_device_math). A fresh
# build-cuda/ costs about 4 minutes on 2 busy cores; a rebuild with nothing changed, 2 seconds.
nvcc_bin=/usr/local/cuda/bin/nvcc
[[ -x $nvcc_bin ]] || nvcc_bin=$(command -v nvcc || true)
if [[ -n $nvcc_bin ]]; then
  phase "build (CUDA backend, build-cuda/: library + backend tests)"
  BUILD_DIR=build-cuda bash scripts/build.sh -DCBL_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc_bin" \
    -DCBL_BUILD_TESTS=ON -DCBL_BUILD_SAMPLES=OFF -DCBL_BUILD_BENCH=OFF \
    -- cacheblend test_backend_ops test_cuda_backend_errors test_backend_registry test_cuda_model \
    test_capi_runtime
  phase "ctest (CUDA backend; test_backend_ops is skipped without a GPU)"
  # How many GPUs the machine has, for test_backend_registry to hold the build's count to (not
  # where CUDA_VISIBLE_DEVICES hides some of them from the CUDA runtime).
  gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU ' || true)
  [[ -n ${CUDA_VISIBLE_DEVICES+set} ]] && gpus=
  CBL_EXPECT_CUDA_DEVICES=$gpus ctest --test-dir build-cuda --output-on-failure --no-tests=error \
    -R '^(test_backend_ops|test_cuda_backend_errors|test_backend_registry|test_cuda_model|test_capi_session_device)$'
  # The GPU check's engine-only build (scripts/gpu-check.sh builds it on the GPU machine): its
  # CMake wiring is configured here (its sources are the ones built above).
  phase "configure (engine only, build-engine/: what scripts/gpu-check.sh builds on a GPU)"
  cmake -S . -B build-engine -DCMAKE_BUILD_TYPE=Release -DCBL_ENGINE_ONLY=ON -DCBL_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc_bin" -DCMAKE_CUDA_ARCHITECTURES=90 -DCBL_MIMALLOC=OFF \
    -DCBL_GTEST_SOURCE_DIR=/usr/src/googletest/googletest >/dev/null
fi

# ---- The CUDA backend on the CUDA emulator (tests/cuda-emulator), on every machine: the same ----
# sources built by g++ against an emulated CUDA runtime and cuBLASLt that run the kernels on the
# host, thread by thread, with stream work deferred until the host waits for it. The GPU tests
# (test_backend_ops, test_cuda_model) then run for real, without a GPU; test_cuda_emulator checks
# the emulator itself. About 7 minutes on 2 cores (most of it test_cuda_model).
# test_cuda_model runs SmolLM2-135M and Qwen2.5-Coder-0.5B cut to 2 layers and 4096 vocabulary
# rows (its K-quant and q5_0 weights, QKV biases and grouped KV heads in a whole model; the full
# model through the emulator would take most of an hour).
phase "build (CUDA backend on the CUDA emulator, build-emu/: engine + GPU tests)"
BUILD_DIR=build-emu bash scripts/build.sh -DCBL_ENGINE_ONLY=ON -DCBL_CUDA_EMULATOR=ON \
  -DCBL_MIMALLOC=OFF -- test_cuda_emulator test_backend_ops test_cuda_model cbl-gguf-reshape \
  cbl-engine-bench
emu_qwen=build-emu/qwen2.5-coder-0.5b.2-layers.gguf
build-emu/bin/cbl-gguf-reshape "$qwen_model" "$emu_qwen" --layers 2 --vocab 4096 >/dev/null
phase "ctest (the GPU tests on the CUDA emulator)"
CBL_GPU_MODELS="$model:$PWD/$emu_qwen" CBL_ENGINE_BENCH_MODEL="$PWD/$emu_qwen" \
  ctest --test-dir build-emu --output-on-failure --no-tests=error -j "${CBL_TEST_JOBS:-2}" \
  -R '^(test_cuda_emulator|test_backend_ops|test_backend_ops_reverse|test_cuda_model_(blend|decode)|cbl_engine_bench_emulated)$'

# The same ops under AddressSanitizer and UBSan: the emulator's guard bytes are poisoned there, so
# a kernel's read outside its allocations is reported as well as a write (about 4 minutes).
phase "build (CUDA emulator under AddressSanitizer, build-emu-asan/)"
BUILD_DIR=build-emu-asan bash scripts/build.sh -DCBL_ENGINE_ONLY=ON -DCBL_CUDA_EMULATOR=ON \
  -DCBL_MIMALLOC=OFF -DCBL_SANITIZE=address,undefined -- test_cuda_emulator test_backend_ops
phase "ctest (every CUDA op on the emulator under AddressSanitizer)"
ctest --test-dir build-emu-asan --output-on-failure --no-tests=error -j "${CBL_TEST_JOBS:-2}" \
  -R '^(test_cuda_emulator|test_backend_ops|test_backend_ops_reverse)$'

# ---- Bindings: go test and cargo test run here once bindings/go and bindings/rust have them. ----
# They link build/libcacheblend.so; CBL_BUILD_DIR and CBL_INCLUDE_DIR tell their build scripts where.
root=$PWD
export CBL_BUILD_DIR="$root/build" CBL_INCLUDE_DIR="$root/capi/include"
export LD_LIBRARY_PATH="$CBL_BUILD_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ -f bindings/go/go.mod ]]; then
  phase "go vet, go test (bindings/go), go build and a run of samples/go"
  bash scripts/install-deps.sh golang-go
  ( # Debian's Go, standard library only: no module proxy. Caches live in the build dir.
    export PKG_CONFIG_PATH="$CBL_BUILD_DIR/pkgconfig-build${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export GOPROXY=off GOFLAGS=-mod=mod GOCACHE="$CBL_BUILD_DIR/go/cache" GOPATH="$CBL_BUILD_DIR/go/path"
    cd bindings/go
    go vet ./...
    go test -count=1 ./...   # -count=1: the test cache does not see libcacheblend.so change
    cd ../../samples/go
    go vet ./...
    go build -o "$CBL_BUILD_DIR/go/bin/" ./...
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir "$tmp/docs"
    echo "Mount Kilimanjaro is a dormant volcano in Tanzania." > "$tmp/docs/kilimanjaro.txt"
    echo "The Amazon river flows through Brazil, Peru and Colombia." > "$tmp/docs/amazon.md"
    "$CBL_BUILD_DIR/go/bin/ask" "$tmp/data" "$tmp/docs" "Where is Kilimanjaro?" > "$tmp/out"
    grep -q "kilimanjaro.txt" "$tmp/out" || { cat "$tmp/out"; echo "go sample: no citation" >&2; exit 1; }
    phase "samples/assistant: go vet, go test (API), and the page in headless Chromium"
    cd ../assistant
    go vet ./...
    go test -count=1 ./...
    go build -o "$CBL_BUILD_DIR/go/bin/" .
    # Debian's python3 has python3-selenium (a pyenv or venv python3 first on PATH may not).
    py=/usr/bin/python3
    [[ -x $py ]] || py=python3
    # Exit 77 is a skip (no browser), which CBL_REQUIRE_MODEL=1 turns into a failure.
    rc=0
    "$py" browser_test.py "$CBL_BUILD_DIR/go/bin/assistant" || rc=$?
    ((rc == 0 || rc == 77)) || exit "$rc"
  )
fi
if [[ -f bindings/rust/Cargo.toml ]]; then
  phase "cargo test (bindings/rust, samples/rust: header check, real-model tests, a sample run)"
  # No registry crates: Debian's cargo (rustc 1.63) is enough, and it is installed when no cargo
  # is on PATH. Target dir: bindings/rust/target (git-ignored).
  command -v cargo >/dev/null || bash scripts/install-deps.sh cargo
  ( cd bindings/rust
    cargo test --offline --workspace
    # With a newer cargo first on PATH (rustup), also check the crates against Debian's rustc 1.63.
    if [[ -x /usr/bin/cargo && -x /usr/bin/rustc && "$(command -v cargo)" != /usr/bin/cargo ]]; then
      RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc /usr/bin/cargo check --offline --workspace \
        --all-targets --target-dir target/rustc-1.63
    fi
  )
fi

if ((sanitize)); then
  phase "build (thread sanitizer, build-tsan/: threading tests only)"
  # test_capi_misuse: sessions freed from another thread mid-ask; test_concurrent_ingest: the
  # writer lock and index reloads (a search thread and a writer in one process);
  # test_blend_loader: the blend loader's helper threads sharing a layer's chunks.
  tsan_tests=(test_capi_threads test_thread_pool test_capi_misuse test_concurrent_ingest
              test_capi_admission test_request_gate test_memory_budget test_blend_loader)
  BUILD_DIR=build-tsan BUILD_TYPE=RelWithDebInfo bash scripts/build.sh \
    -DCBL_SANITIZE=thread -DCBL_BUILD_BENCH=OFF -DCBL_BUILD_SAMPLES=OFF -- "${tsan_tests[@]}"
  phase "ctest (thread sanitizer)"
  # libgomp is not instrumented: FAISS runs single-threaded here instead of suppressing reports.
  OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1${TSAN_OPTIONS:+ $TSAN_OPTIONS}" \
    ctest --test-dir build-tsan --output-on-failure --no-tests=error -j 1 \
      -R "^($(IFS='|'; echo "${tsan_tests[*]}"))\$"

  # The CUDA kernels' races: under ThreadSanitizer the emulator's threads are fibers TSan knows,
  # ordered only by __syncthreads (tests/cuda-emulator/fibers.cpp), so two threads of a block
  # touching the same memory without a barrier between them are reported whatever order they ran
  # in (a missing __syncthreads), and a grid's blocks run on two host threads, so blocks racing
  # are too. The long attention cases are left out there (CBL_BACKEND_OPS_SHORT). About 2 minutes
  # of tests.
  phase "build (CUDA emulator under ThreadSanitizer, build-emu-tsan/)"
  BUILD_DIR=build-emu-tsan BUILD_TYPE=RelWithDebInfo bash scripts/build.sh \
    -DCBL_ENGINE_ONLY=ON -DCBL_CUDA_EMULATOR=ON \
    -DCBL_MIMALLOC=OFF -DCBL_SANITIZE=thread -- test_cuda_emulator test_backend_ops
  phase "ctest (every CUDA op on the emulator under ThreadSanitizer: races in and between blocks)"
  CBL_BACKEND_OPS_SHORT=1 TSAN_OPTIONS="second_deadlock_stack=1${TSAN_OPTIONS:+ $TSAN_OPTIONS}" \
    ctest --test-dir build-emu-tsan --output-on-failure --no-tests=error -j "${CBL_TEST_JOBS:-2}" \
      -R '^(test_cuda_emulator|test_backend_ops)$'

  phase "build (address,undefined sanitizers, build-asan/)"
  BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo bash scripts/build.sh \
    -DCBL_SANITIZE=address,undefined -DCBL_BUILD_BENCH=OFF
  phase "ctest (address,undefined)"
  ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
    run_ctest build-asan
fi
phase "done"
