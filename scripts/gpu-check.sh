#!/usr/bin/env bash
# The CUDA backend's check on a GPU (issue 16; README, "GPU check"), one command on a bare GPU
# machine with the repository, fetching nothing: builds the engine alone for the GPU it finds
# (CBL_ENGINE_ONLY: kernels + core + tests/gpu; no FAISS, documents or C ABI, which such machines
# lack), runs the GPU tests against the CPU (op by op, then whole models: greedy decoding,
# a 4096-token context, blend at r = 1 = full, blend at r = 0.15 against the CPU's) and the AMX
# tiles' test on the host CPU, then cbl-engine-bench on the GPU and on the CPU (prefill 512,
# decode 128, full vs blend TTFT of a 6-chunk prompt, the blend loader's read rate) on the models
# blown up to their full shape, then, in the time left of 8 minutes, compute-sanitizer's memcheck
# on the newest kernels, and prints one summary (speed per model and device, then the verdict).
# About 5 minutes on an H100 before memcheck. Every step runs under a time limit, so a hang costs
# that step, not the report.
#
# GPU machines here take at most 64 MiB of files and reach no network, so the models travel cut
# down to a layer or two and part of their vocabulary (real weights and quant types), with what
# the build needs that such a machine lacks (SQLite's header and library, GoogleTest's source):
#   bash scripts/gpu-check.sh --prepare   # here, after scripts/build.sh: fills gpu-check/ (git-
#                                         # ignored, about 52 MB) from the model cache
#   bash scripts/gpu-check.sh             # there (the device tool: carry gpu-check), writes
#                                         # the summary to stdout, logs to gpu-check/out (and,
#                                         # where $OUT is set, all of them in one
#                                         # $OUT/gpu-check-logs.tgz: the device tool brings back
#                                         # at most 8 files)
#   bash scripts/gpu-check.sh --build-only  # anywhere with nvcc: the build and the host test only
#                                           # (sm_90 unless CUDA_ARCH says), to check the build
#   GPU_CHECK_SELFTEST=1 bash scripts/gpu-check.sh  # anywhere with nvcc: the whole flow with the
#                                           # CPU standing in for the GPU (the tests' self-tests)
# Environment: GPU_CHECK_DIR (gpu-check), BUILD_DIR (build-gpu), CUDA_ARCH (from nvidia-smi).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
die() { echo "gpu-check: error: $*" >&2; exit 1; }
dir=${GPU_CHECK_DIR:-gpu-check}

# name  source model   layers  vocabulary. The default model and the test suite's; the 0.5B
# (one layer: 17 MB) does not fit beside them, and its Q5_0/Q8_0 weights are in test_backend_ops.
models=(
  "smollm2-135m       smollm2-135m       2 8192"
  "qwen2.5-coder-1.5b qwen2.5-coder-1.5b 1 4096"
)

if [[ ${1:-} == --prepare ]]; then
  reshape=${BUILD:-build}/bin/cbl-gguf-reshape
  [[ -x $reshape ]] || die "$reshape not built (bash scripts/build.sh)"
  rm -rf "$dir" && mkdir -p "$dir/include" "$dir/lib"
  for m in "${models[@]}"; do
    read -r name src layers vocab <<<"$m"
    full=$(bash scripts/fetch-model.sh "$src")
    "$reshape" "$full" "$dir/$name.cut.gguf" --layers "$layers" --vocab "$vocab"
    # The full shape to blow the cut model up to there, from the real file.
    python3 - "$full" >"$dir/$name.shape" <<'PY'
import struct, sys
# GGUF v3 header: the block count and the vocabulary size from the metadata (scalars only).
f = open(sys.argv[1], 'rb'); f.read(8)
n_tensors, n_kv = struct.unpack('<QQ', f.read(16))
def s(): n, = struct.unpack('<Q', f.read(8)); return f.read(n).decode('utf-8', 'replace')
size = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
fmt = {0: '<B', 1: '<b', 2: '<H', 3: '<h', 4: '<I', 5: '<i', 6: '<f', 7: '<?', 10: '<Q', 11: '<q', 12: '<d'}
layers = vocab = None
for _ in range(n_kv):
    k = s(); t, = struct.unpack('<I', f.read(4))
    if t == 8: s(); continue
    if t == 9:
        et, n = struct.unpack('<IQ', f.read(12))
        if k == 'tokenizer.ggml.tokens': vocab = n
        if et == 8:
            for _ in range(n): s()
        else: f.seek(size[et] * n, 1)
        continue
    v, = struct.unpack(fmt[t], f.read(size[t]))
    if k.endswith('.block_count'): layers = v
print(layers, vocab)
PY
  done
  cp /usr/include/sqlite3.h "$dir/include/"
  cp -L /usr/lib/x86_64-linux-gnu/libsqlite3.so.0 "$dir/lib/"
  cp -r /usr/src/googletest/googletest "$dir/googletest"  # GoogleTest alone, no GoogleMock
  du -sh "$dir"
  echo "gpu-check: ready; on the GPU machine run: bash scripts/gpu-check.sh (carry $dir)"
  exit 0
fi

[[ -d $dir ]] || die "$dir/ missing: run 'bash scripts/gpu-check.sh --prepare' where the models are"
out=$dir/out
rm -rf "$out" && mkdir -p "$out"
build=${BUILD_DIR:-build-gpu}
t0=$SECONDS
build_only=0
[[ ${1:-} == --build-only ]] && build_only=1
gpu=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null | head -1 || true)
selftest=${GPU_CHECK_SELFTEST:-0}
devices=(cuda:0 cpu)
if ((selftest)); then
  gpu="none (self-test: a second CPU backend stands in), 9.0"
  devices=(cpu)
  export CBL_CUDA_MODEL_SELFTEST=1 CBL_BACKEND_OPS_SELFTEST=1
elif [[ -z $gpu ]]; then
  ((build_only)) || die "nvidia-smi finds no GPU (--build-only checks the build without one)"
  gpu="no GPU, 9.0"
fi
arch=${CUDA_ARCH:-$(echo "${gpu##*, }" | tr -d '.')}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
# A driver older than the toolkit's runtime makes every GPU test skip as "no device": name both.
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
toolkit=$("$nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*' || echo 'nvcc missing')
versions="driver ${driver:-none}, CUDA $toolkit"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
grep -qw amx_int8 /proc/cpuinfo && cpu="$cpu, AMX-INT8" || cpu="$cpu, no AMX"

# Every step runs under a limit taken from what is left of the 8 minutes (at least 30 s, at most
# its own cap), so a hung kernel or test costs its step, not the whole report.
budget=480
limit() {
  local cap=$1 left=$((budget - (SECONDS - t0)))
  ((left < 30)) && left=30
  echo $((left < cap ? left : cap))
}
limited() { local s=$1; shift; timeout --kill-after=10 "$s" "$@"; }
# Whether exit status $1 is limited's: timeout's 124, or 137 when it had to kill.
timed_out() { (($1 == 124 || $1 == 137)); }
bigs=()
finish() {
  rm -f "${bigs[@]}"
  if [[ -n ${OUT:-} ]]; then tar czf "$OUT/gpu-check-logs.tgz" -C "$out" . 2>/dev/null || true; fi
}
trap finish EXIT

sqlite=()
if [[ ! -f /usr/include/sqlite3.h ]]; then
  lib=$(ls /usr/lib/x86_64-linux-gnu/libsqlite3.so.0 2>/dev/null || echo "$root/$dir/lib/libsqlite3.so.0")
  sqlite=(-DSQLite3_INCLUDE_DIR="$root/$dir/include" -DSQLite3_LIBRARY="$lib")
fi
# Ninja where there is one (the GPU image has CMake and ninja, not necessarily make); a build
# folder keeps the generator it was configured with.
generator=()
if [[ -f $build/CMakeCache.txt ]]; then
  generator=(-G "$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build/CMakeCache.txt")")
elif command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
echo "== build ($gpu, sm_$arch; $versions)" >&2
cmake "${generator[@]}" -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCBL_ENGINE_ONLY=ON \
  -DCBL_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCBL_MIMALLOC=OFF \
  -DCBL_GTEST_SOURCE_DIR="$root/$dir/googletest" "${sqlite[@]}" >"$out/configure.log" 2>&1 ||
  { tail -30 "$out/configure.log"; die "configure failed"; }
cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; die "build failed"; }
build_s=$((SECONDS - t0))
if ((build_only)); then
  "$build/tests/test_cuda_device_math" >"$out/test_cuda_device_math.log" 2>&1 ||
    { tail -20 "$out/test_cuda_device_math.log"; die "test_cuda_device_math failed"; }
  echo "gpu-check: engine-only CUDA build (sm_$arch) in ${build_s}s; host device math passed"
  exit 0
fi

cut_models=()
for m in "${models[@]}"; do
  read -r name _ <<<"$m"
  [[ -f $dir/$name.cut.gguf ]] && cut_models+=("$root/$dir/$name.cut.gguf")
done
echo "== GPU tests" >&2
export CBL_GPU_MODELS=$(IFS=:; echo "${cut_models[*]}") CBL_REQUIRE_MODEL=1
echo "  host CPU: $cpu ($(nproc) cores)"
for t in test_cuda_device_math test_cuda_backend_errors test_backend_ops test_cuda_model \
  test_igemm_amx; do
  rc=0
  s=$(limit 200)
  limited "$s" "$build/tests/$t" >"$out/$t.log" 2>&1 || rc=$?
  if ((rc == 0)); then
    echo "  $t: passed ($(grep -c '^\[       OK' "$out/$t.log") tests," \
      "$(grep -c '^\[  SKIPPED' "$out/$t.log") skipped)"
  elif timed_out $rc; then
    echo "  $t: FAILED (timed out after ${s}s), last lines:"
    tail -5 "$out/$t.log" | sed 's/^/    /'
  else
    echo "  $t: FAILED (rc $rc), last lines:"
    # 77: skipped, which here means the GPU was not usable; the log says why.
    grep -E 'Failure|FAILED|Expected|Which is|error|exception|SKIPPED|skipped' "$out/$t.log" |
      head -20 | sed 's/^/    /' || true
  fi
done | tee "$out/tests.txt"
tests_ok=1
grep -q FAILED "$out/tests.txt" && tests_ok=0
# Attention of 64+ rows runs as GEMMs (kernels/cuda/attention-gemm.cu); the row kernel serves
# decode. Its op tests again with every batch on the row kernel, and on a model failure the models
# that way too, so a failure points at one path or the other.
rows_tests=(test_backend_ops)
grep -q 'test_cuda_model: FAILED' "$out/tests.txt" && rows_tests+=(test_cuda_model)
for t in "${rows_tests[@]}"; do
  rc=0
  CBL_CUDA_ATTENTION=rows limited "$(limit 150)" "$build/tests/$t" >"$out/$t.rows.log" 2>&1 || rc=$?
  if ((rc == 0)); then
    echo "  $t, attention on the row kernel only: passed"
  else
    echo "  $t, attention on the row kernel only: FAILED (rc $rc)"
  fi
done | tee -a "$out/tests.txt"
grep -q 'row kernel only: FAILED' "$out/tests.txt" && tests_ok=0
grep '^\[ model \]' "$out/test_cuda_model.log" || true

echo "== speed (models blown up to their full shape)" >&2
bench_ok=1
for m in "${models[@]}"; do
  read -r name _ <<<"$m"
  [[ -f $dir/$name.shape ]] || continue
  read -r layers vocab <"$dir/$name.shape"
  big=/tmp/$name.full.gguf
  bigs+=("$big")
  if ! "$build/bin/cbl-gguf-reshape" "$dir/$name.cut.gguf" "$big" --layers "$layers" \
    --vocab "$vocab" >"$out/reshape-$name.log" 2>&1; then
    echo "  $name: reshape FAILED: $(tail -1 "$out/reshape-$name.log")"
    bench_ok=0
    continue
  fi
  for dev in "${devices[@]}"; do
    echo "  $name on $dev:"
    log=$out/bench-$name-${dev//:/}.jsonl  # no ':' in names the device tool brings back
    rc=0
    limited "$(limit 150)" "$build/bin/cbl-engine-bench" "$big" --device "$dev" \
      --threads "$(nproc)" >"$log" 2>&1 || rc=$?
    sed 's/^/    /' "$log"
    if ((rc != 0)); then
      why="rc $rc"
      timed_out $rc && why="timed out"
      echo "    FAILED ($why)"
      bench_ok=0
    fi
  done
  rm -f "$big"
done
# Out-of-bounds and misaligned device accesses in the kernels that have run least (matmul
# staging, the fused GEMVs, both attention paths and the split one, attention_mass), when the toolkit has compute-sanitizer and the
# run has time left of its 8 minutes (memcheck slows kernels 10-100x).
sanitizer=$(command -v compute-sanitizer || ls "$(dirname "$nvcc")/compute-sanitizer" 2>/dev/null || true)
left=$((budget - 30 - (SECONDS - t0)))
if ((selftest == 0)) && [[ -n $sanitizer ]] && ((left > 60)); then
  rc=0
  filter='BackendOps.MatmulActivationsBeyondHalfRange:BackendOps.Fused*:BackendOps.Attention*'
  limited "$left" "$sanitizer" --tool memcheck --error-exitcode 3 "$build/tests/test_backend_ops" \
    --gtest_filter="$filter" >"$out/memcheck.log" 2>&1 || rc=$?
  # Only reported accesses count against the kernels: the sanitizer may refuse the device (it
  # did on gVisor machines: "Device not supported"), and a test failing under it failed above.
  found=$(grep -cE '^========= (Invalid|Program hit)' "$out/memcheck.log" || true)
  if ((rc == 0)); then
    echo "  memcheck (matmul, fused matmuls, attention, attention_mass): clean"
  elif ((found > 0)); then
    echo "  memcheck: ERRORS (rc $rc), first ones:"
    grep -E '^========= (Invalid|Program hit)' "$out/memcheck.log" | head -8 | sed 's/^/    /'
    tests_ok=0
  elif timed_out $rc; then
    echo "  memcheck: stopped after ${left}s (no verdict)"
  else
    echo "  memcheck: no verdict (rc $rc): $(grep -m1 -E '=========|FAILED' "$out/memcheck.log" || tail -1 "$out/memcheck.log")"
  fi
else
  echo "  memcheck: not run (no compute-sanitizer, self-test, or no time left)"
fi
# The speed lines in one place: per model and device, prefill and decode tokens/s, full vs
# blended TTFT, and the loader's best read rate.
python3 - "$out" <<'PY' || true
import glob, json, os, sys
out = sys.argv[1]
for path in sorted(glob.glob(os.path.join(out, 'bench-*.jsonl'))):
    rows = {}
    load = 0.0
    for line in open(path, errors='replace'):
        try: j = json.loads(line)
        except ValueError: continue
        if j.get('bench') == 'kv_load': load = max(load, j.get('gb_per_s', 0))
        else: rows[j.get('bench')] = j
    name = os.path.basename(path)[len('bench-'):-len('.jsonl')]
    p, d, t = rows.get('prefill', {}), rows.get('decode', {}), rows.get('ttft', {})
    o = rows.get('decode_op_by_op', {})
    how = (f" (CUDA graph; {o.get('tokens_per_s', '?')} t/s op by op)" if d.get('replayed')
           else f" (op by op: {d.get('op_by_op_why', '?')})" if 'replayed' in d else '')
    print(f"speed {name}: prefill {p.get('tokens_per_s', '?')} t/s, decode {d.get('tokens_per_s', '?')} t/s{how}, "
          f"TTFT full {t.get('full_ms', '?')} ms vs blend {t.get('blend_ms', '?')} ms "
          f"({t.get('speedup', '?')}x, load wait {t.get('blend_load_wait_ms', '?')} ms), "
          f"KV load up to {load:.1f} GB/s")
PY
# The AMX kernel has run on an emulator only elsewhere: say whether real tiles ran here.
if grep -q '^\[       OK \] IgemmAmx.HardwareTilesMatchReferenceBitForBit' "$out/test_igemm_amx.log" 2>/dev/null; then
  echo "  AMX tiles on this host's CPU: bit for bit the reference (test_igemm_amx)"
else
  echo "  AMX tiles not run: $(grep -m1 -o 'no AMX on this CPU[^(]*' "$out/test_igemm_amx.log" 2>/dev/null || echo 'see test_igemm_amx.log')"
fi
echo "gpu-check: $gpu; $versions; host $cpu; build ${build_s}s;" \
  "tests $([[ $tests_ok == 1 ]] && echo passed || echo FAILED);" \
  "bench $([[ $bench_ok == 1 ]] && echo ran || echo FAILED); total $((SECONDS - t0))s; logs in $out"
[[ $tests_ok == 1 && $bench_ok == 1 ]]
