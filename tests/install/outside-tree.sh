#!/usr/bin/env bash
# A Go module and a Rust crate OUTSIDE the source tree, built against an installed library by
# the exact steps of bindings/go/README.md and bindings/rust/README.md (issue 13, item 5): the
# test installs the build into a temporary prefix, takes each README's shell block marked
# `<!-- outside-tree:LANG -->`, runs it as written in an empty folder under /tmp and checks the
# program's output. Neither run has LD_LIBRARY_PATH: the run paths come from the installed
# cacheblend.pc (Go) and the README's build.rs (Rust).
#   outside-tree.sh BUILD_DIR SOURCE_DIR [go|rust]...   (default: both; a missing toolchain skips
#                                                         that language, exit 77 if none ran)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
shift 2
langs=("$@")
((${#langs[@]})) || langs=(go rust)

work=$(mktemp -d /tmp/cbl-outside-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "outside-tree: $*" >&2; exit 1; }
cmake --install "$build" --prefix "$prefix" >"$work/install.log"

# The fenced ```sh block that follows the marker line in a README.
block() {
  awk -v m="<!-- outside-tree:$2 -->" '
    $0 == m { armed = 1; next }
    armed && /^```sh$/ { inside = 1; next }
    inside && /^```$/ { exit }
    inside { print }' "$1"
}

ran=0
for lang in "${langs[@]}"; do
  case $lang in
    go) readme=$src/bindings/go/README.md tool=go ;;
    rust) readme=$src/bindings/rust/README.md tool=cargo ;;
    *) fail "unknown language $lang" ;;
  esac
  if ! command -v "$tool" >/dev/null; then
    echo "outside-tree: skip $lang: no $tool on PATH" >&2
    continue
  fi
  steps=$(block "$readme" "$lang")
  [[ -n $steps ]] || fail "$readme has no block marked outside-tree:$lang"
  dir=$work/$lang
  mkdir "$dir"
  # A clean environment for the app: no build-tree hints, no library path; caches in $work.
  out=$(cd "$dir" && env -u LD_LIBRARY_PATH -u CBL_BUILD_DIR -u CBL_INCLUDE_DIR -u PKG_CONFIG_PATH \
      -u GOFLAGS -u GOPROXY -u CARGO_TARGET_DIR CACHEBLEND_SRC="$src" PREFIX="$prefix" \
      GOCACHE="$work/go-cache" GOPATH="$work/go-path" \
      bash -euo pipefail -c "$steps" 2>"$work/$lang.err") ||
    fail "$lang: the README's steps failed:"$'\n'"$(tail -n 30 "$work/$lang.err")"
  grep -q "^libcacheblend [0-9][0-9.]* devices .*cpu" <<<"$out" || fail "$lang printed: $out"
  # The program must have loaded the installed library, not one from the build tree.
  exe=$(find "$dir" -type f \( -name hello -path '*hello-go*' -o -path '*target/debug/hello' \) |
    head -n 1)
  lib=$(env -u LD_LIBRARY_PATH ldd "$exe" | awk '/libcacheblend/ {print $3}')
  [[ $lib == "$prefix"/* ]] || fail "$lang: $exe loads '$lib', not the installed library"
  echo "outside-tree: $lang: $out"
  ran=$((ran + 1))
done
((ran > 0)) || exit 77
