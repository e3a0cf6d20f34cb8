#!/usr/bin/env bash
# The main job: install what is missing, fetch the model and embedder, build (Release),
# then run retrieval-augmented answering end to end on a real document set that every Debian
# system ships (licence texts from /usr/share/common-licenses): ingest them with eager KV
# precompute into ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/demo, ask a question with blended
# KV reuse, and print the answer, its citations and the time to first token of blend vs full.
#   bash scripts/main.sh ["your question"]     (CBL_MODEL, CBL_THREADS, CBL_MAX_TOKENS, CBL_K)
# The model is the product default, qwen2.5-coder-1.5b (about 1.1 GB, fetched once); CBL_MODEL
# picks another, as a registry name (`cacheblend models`) or a GGUF path.
# Idempotent: a second run re-ingests incrementally (unchanged files are skipped) and reuses the
# stored chunk KV.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

question=${1:-"What does the Apache License say about patent grants?"}

bash scripts/install-deps.sh
model_name=${CBL_MODEL:-qwen2.5-coder-1.5b}
model=$(bash scripts/fetch-model.sh "$model_name")
embed_model=$(bash scripts/fetch-embedder.sh); export CBL_EMBED_MODEL="$embed_model"
bash scripts/build.sh >&2

cli=${BUILD_DIR:-build}/bin/cacheblend
[[ -x "$cli" ]] || { echo "main: error: $cli was not built" >&2; exit 1; }

# The documents: licence texts from Debian's base-files package. They have no extension, so they
# are copied as .txt (cp -p keeps content and mtime: an unchanged copy is skipped on re-ingest).
demo=${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/demo
docs=$demo/docs
mkdir -p "$docs"
src=/usr/share/common-licenses
n=0
for f in Apache-2.0 BSD Artistic CC0-1.0 MPL-2.0 LGPL-3; do
    if [[ -f "$src/$f" ]]; then
        cmp -s "$src/$f" "$docs/$f.txt" || cp -p "$src/$f" "$docs/$f.txt"
        n=$((n + 1))
    fi
done
(( n > 0 )) || { echo "main: error: no licence texts found in $src" >&2; exit 1; }

threads=()
[[ -n "${CBL_THREADS:-}" ]] && threads=(--threads "$CBL_THREADS")

echo "main: $cli ingest --data $demo/data $docs --precompute" >&2
t0=$(date +%s)
"$cli" ingest --model "$model" --data "$demo/data" "$docs" --precompute >&2
echo "main: ingest took $(( $(date +%s) - t0 )) s" >&2

args=(ask --model "$model" --data "$demo/data" "$question" --k "${CBL_K:-4}"
      --max-tokens "${CBL_MAX_TOKENS:-128}" --compare-full --json "${threads[@]}")
echo "main: $cli ${args[*]}" >&2
out=$("$cli" "${args[@]}")

# The JSON fields are fixed (docs/ARCHITECTURE.md, 'Command-line tool').
python3 - "$model_name" "$model" "$question" "$out" <<'PY'
import json, sys
name, model, question, r = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
s = r.get('stats', {})
num = lambda v, f='.1f': format(v, f) if isinstance(v, (int, float)) else 'n/a'
print(f'model:    {name}' + ('' if name == model else f' ({model})'))
print(f'question: {question}\n')
print(r.get('text', '').strip() + '\n')
print('citations:')
for i, c in enumerate(r.get('citations', []), 1):
    print(f"  [{i}] {c['uri']}:{c['start']}-{c['end']}  score {num(c['score'], '.4f')}")
print()
print(f"prompt:   {s.get('tokens_total')} tokens: {s.get('tokens_reused')} reused from the KV store, "
      f"{s.get('tokens_recomputed')} recomputed, {s.get('tokens_missed')} missed; "
      f"{s.get('chunks_dropped', 0)} chunks dropped for the context budget")
print(f"TTFT:     {s.get('mode')} {num(s.get('ttft_ms'))} ms vs full {num(s.get('full_ttft_ms'))} ms "
      f"({num(s.get('speedup_vs_full'), '.2f')}x faster)")
print(f"decode:   {len(r.get('tokens', []))} tokens, {num(s.get('decode_tokens_per_s'))} tokens/s")
PY
