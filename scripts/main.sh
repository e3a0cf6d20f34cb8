#!/usr/bin/env bash
# The main job: install what is missing, fetch the default model, build (Release), then answer a
# chat question with the default model and report prefill and decode speed.
#   bash scripts/main.sh ["your question"]     (CBL_MODEL, CBL_THREADS, CBL_MAX_TOKENS optional)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

question=${1:-"What are three practical ways to save energy at home? Answer briefly."}

bash scripts/install-deps.sh
model=$(bash scripts/fetch-model.sh)
embed_model=$(bash scripts/fetch-embedder.sh); export CBL_EMBED_MODEL="$embed_model"
bash scripts/build.sh >&2

cli=build/bin/cacheblend
[[ -x "$cli" ]] || { echo "main: error: $cli was not built" >&2; exit 1; }
args=(generate --model "$model" --chat --prompt "$question" --max-tokens "${CBL_MAX_TOKENS:-128}" --json)
[[ -n "${CBL_THREADS:-}" ]] && args+=(--threads "$CBL_THREADS")

echo "main: $cli ${args[*]}" >&2
out=$("$cli" "${args[@]}")

# The JSON fields are fixed by DESIGN.md §8.
python3 - "$model" "$question" "$out" <<'PY'
import json, sys
model, question, r = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
s = r.get('stats', {})
num = lambda v: f'{v:.1f}' if isinstance(v, (int, float)) else 'n/a'
print(f'model:    {model}')
print(f'question: {question}\n')
print(r.get('text', '').strip() + '\n')
print(f"prefill:  {len(r.get('prompt_tokens', []))} prompt tokens in {num(s.get('prefill_ms'))} ms, "
      f"{num(s.get('prefill_tokens_per_s'))} tokens/s")
print(f"decode:   {len(r.get('tokens', []))} tokens, {num(s.get('decode_tokens_per_s'))} tokens/s")
PY
