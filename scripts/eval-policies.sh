#!/usr/bin/env bash
# The selection-policy comparison (issue 15; README, "Token selection policies"): full, reuse,
# then blend under every policy at every ratio on a QA dataset, one full run as the reference of
# all, and a PNG of fidelity against speed-up with one curve per policy. A benchmark run by hand,
# not a test: on 2 CPU threads with Qwen2.5-Coder-1.5B a licence-QA record (about 2900 tokens)
# takes about two minutes, a musique record (about 6000) five.
#   bash scripts/eval-policies.sh DATASET
# Environment: LIMIT (30), POLICIES (hkvd,sink,sink+hkvd,query,query+hkvd), RATIOS
# (0.02,0.05,0.1,0.15,0.3), OUT_DIR (build/eval-policies), BUILD_DIR (build), CBL_THREADS,
# CBL_MODEL (default qwen2.5-coder-1.5b), CBL_KV_STORE, CBL_KV_FORMAT, CBL_KV_BUDGET. Finished
# records are journaled in OUT_DIR/journal.jsonl: run the script again after a stop (LIMIT may
# grow) and it continues.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
die() { echo "eval-policies: error: $*" >&2; exit 1; }
dataset=${1:-}
[[ -n "$dataset" && -f "$dataset" ]] || die "usage: bash scripts/eval-policies.sh DATASET.json"

limit=${LIMIT:-30}
policies=${POLICIES:-hkvd,sink,sink+hkvd,query,query+hkvd}
ratios=${RATIOS:-0.02,0.05,0.1,0.15,0.3}
build_dir=${BUILD_DIR:-build}
out_dir=${OUT_DIR:-$build_dir/eval-policies}
venv="${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/venv-plot"
model=$(bash scripts/fetch-model.sh)
cli=${CBL_CLI:-$build_dir/bin/cacheblend}
[[ -x "$cli" ]] || die "$cli not built (bash scripts/build.sh)"
mkdir -p "$out_dir"

args=(eval --model "$model" --dataset "$dataset" --limit "$limit" --modes full,reuse
      --policies "$policies" --ratios "$ratios" --max-tokens 32 --json
      --out "$out_dir/results.json" --resume "$out_dir/journal.jsonl")
[[ -n "${CBL_THREADS:-}" ]] && args+=(--threads "$CBL_THREADS")
[[ -n "${CBL_KV_STORE:-}" ]] && args+=(--store "$CBL_KV_STORE")
[[ -n "${CBL_KV_FORMAT:-}" ]] && args+=(--kv-format "$CBL_KV_FORMAT")
[[ -n "${CBL_KV_BUDGET:-}" ]] && args+=(--kv-budget "$CBL_KV_BUDGET")
echo "eval-policies: $cli ${args[*]}" >&2
"$cli" "${args[@]}" >"$out_dir/summary.json"

if ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet 'matplotlib>=3.7,<4' >&2
fi
"$venv/bin/python" scripts/plot-policies.py "$out_dir/summary.json" "$out_dir/policies.png" --markdown
