#!/usr/bin/env bash
# Build the llama.cpp peer used for parity fixtures and speed comparisons: a venv holding a pinned
# llama-cpp-python compiled with AVX-512 + VNNI + BF16 and no AMX (GCC 12 miscompiles ggml's AMX
# tile config), plus numpy. Prints the venv's python on stdout.
#   CBL_PEER_VENV   venv location (default ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/peer-venv)
# Idempotent: an existing venv with the pinned version and the right CPU features is kept.
# The build takes ~15-25 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

LLAMA_CPP_PYTHON_VERSION=0.3.36
NUMPY_VERSION=2.4.6
CMAKE_ARGS_PEER="-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"

venv=${CBL_PEER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/peer-venv}
py="$venv/bin/python"
stamp="$venv/cacheblend-peer.txt"
log() { echo "setup-llama-cpp: $*" >&2; }

# The build itself is the evidence: version pinned, AVX-512 VNNI/BF16 on, AMX off.
peer_ok() {
  [[ -x "$py" ]] && "$py" - "$LLAMA_CPP_PYTHON_VERSION" <<'PY' 2>/dev/null
import sys, llama_cpp
info = llama_cpp.llama_print_system_info().decode()
ok = (llama_cpp.__version__ == sys.argv[1] and "AVX512_VNNI = 1" in info
      and "AVX512_BF16 = 1" in info and "AMX" not in info)
sys.exit(0 if ok else 1)
PY
}

if peer_ok; then
  log "peer ready in $venv (llama-cpp-python $LLAMA_CPP_PYTHON_VERSION)"
else
  bash scripts/install-deps.sh
  [[ -x "$py" ]] || python3 -m venv "$venv"
  log "building llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION with $CMAKE_ARGS_PEER (takes a while)"
  # --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS and could hand back a -march=native build.
  CMAKE_ARGS="$CMAKE_ARGS_PEER" FORCE_CMAKE=1 "$py" -m pip install --no-cache-dir \
    --no-binary=llama-cpp-python --force-reinstall --disable-pip-version-check -q \
    "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" "numpy==$NUMPY_VERSION" >&2
  peer_ok || { log "error: the built peer lacks the expected CPU features or version"; exit 1; }
fi

# Record how the peer was built; gen-fixtures.py and bench-vs-llama-cpp.py copy it into results.
if [[ ! -f "$stamp" ]] || ! grep -qx "llama_cpp_python=$LLAMA_CPP_PYTHON_VERSION" "$stamp"; then
  printf 'llama_cpp_python=%s\ncmake_args=%s\ncompiler=%s\n' "$LLAMA_CPP_PYTHON_VERSION" \
    "$CMAKE_ARGS_PEER" "$(g++ --version | head -n1)" >"$stamp"
fi
echo "$py"
