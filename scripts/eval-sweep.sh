#!/usr/bin/env bash
# The recompute-ratio sweep (docs/ARCHITECTURE.md, 'Evaluation'): full, reuse, then blend at each
# ratio on the first LIMIT musique records, and a PNG of TTFT and fidelity against r. A benchmark
# run by hand, not a test: on 2 CPU threads the default 50 records take roughly half an hour (the
# first run also fills the KV store with every passage, untimed).
#   bash scripts/eval-sweep.sh [DATASET]
# DATASET defaults to ../shared/cacheblend_inputs/musique_s.json next to the repository.
# Environment: LIMIT (50), RATIOS (0.05,0.1,0.15,0.2,0.3,1.0), OUT_DIR (build/eval-sweep),
# BUILD_DIR (build), CBL_THREADS, CBL_MODEL (a model name or GGUF path; default qwen2.5-coder-1.5b,
# the model quality claims are measured on), CBL_KV_STORE (the CLI's default store otherwise),
# CBL_KV_FORMAT (f16, q8 or exact; default f16), CBL_KV_BUDGET (the store's size, default 8G: 50
# records of f16 KV take ~7 GB, of exact KV ~10 GB). Finished records are journaled in
# OUT_DIR/sweep-journal.jsonl: run the script again after a stop and it continues; delete that
# file to start over (a run with other settings refuses it).
# Plotting uses matplotlib from PyPI in a venv under ${XDG_CACHE_HOME:-~/.cache}/cacheblend/; the
# library never depends on it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

log() { echo "eval-sweep: $*" >&2; }
die() { echo "eval-sweep: error: $*" >&2; exit 1; }

dataset=${1:-}
if [[ -z "$dataset" ]]; then
  dataset="$root/../shared/cacheblend_inputs/musique_s.json"
  [[ -f "$dataset" ]] || die "no dataset given and $dataset is absent: pass the musique_s.json path"
fi
[[ -f "$dataset" ]] || die "dataset $dataset not found"

limit=${LIMIT:-50}
ratios=${RATIOS:-0.05,0.1,0.15,0.2,0.3,1.0}
build_dir=${BUILD_DIR:-build}
out_dir=${OUT_DIR:-$build_dir/eval-sweep}
cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend"
venv="$cache_dir/venv-plot"

model=$(bash scripts/fetch-model.sh)
cli="$build_dir/bin/cacheblend"
if [[ ! -x "$cli" ]]; then
  log "building $cli"
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$build_dir" --target cacheblend-cli -j "$(nproc)" >&2
fi
mkdir -p "$out_dir"

args=(eval --model "$model" --dataset "$dataset" --limit "$limit" --modes full,reuse,blend
      --ratios "$ratios" --max-tokens 32 --json --out "$out_dir/sweep-results.json"
      --resume "$out_dir/sweep-journal.jsonl")
[[ -n "${CBL_THREADS:-}" ]] && args+=(--threads "$CBL_THREADS")
[[ -n "${CBL_KV_STORE:-}" ]] && args+=(--store "$CBL_KV_STORE")
[[ -n "${CBL_KV_FORMAT:-}" ]] && args+=(--kv-format "$CBL_KV_FORMAT")
[[ -n "${CBL_KV_BUDGET:-}" ]] && args+=(--kv-budget "$CBL_KV_BUDGET")
log "$cli ${args[*]}"
"$cli" "${args[@]}" >"$out_dir/sweep-summary.json"

# matplotlib in its own venv, installed once.
if ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  log "installing matplotlib into $venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet 'matplotlib>=3.7,<4' >&2
fi
"$venv/bin/python" scripts/plot-sweep.py "$out_dir/sweep-summary.json" "$out_dir/sweep.png"
log "summary: $out_dir/sweep-summary.json, per record: $out_dir/sweep-results.json"
log "plot: $out_dir/sweep.png"
