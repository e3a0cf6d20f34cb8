#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds samples/c/ask.c against the installed
# header and library only, once through find_package(cacheblend) and once through pkg-config, and
# runs both: ingest a small folder and answer a question with citations (issue 5).
#   run-install-test.sh BUILD_DIR SOURCE_DIR
# Runs on the suite's model: $CBL_MODEL (a path or a model name), else smollm2-135m. Exits 77
# (skip) without it unless CBL_REQUIRE_MODEL=1.
set -euo pipefail
build=$1
src=$2
model=${CBL_MODEL:-smollm2-135m}
if [[ ! -f $model ]]; then
  # A model name: its file in the cache folder, as the library resolves it (the registry is the
  # one place that maps names to files).
  file=$(awk -F'\t+' -v n="$model" '$1 == "model" && $2 == n { print $3 }' \
    "$src/core/model/model-registry.tsv")
  if [[ -n $file ]]; then model=${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/models/$file; fi
fi
if [[ ! -f $model ]]; then
  [[ ${CBL_REQUIRE_MODEL:-} == 1 ]] && { echo "the suite's model is missing: $model" >&2; exit 1; }
  echo "skip: the suite's model is missing: $model" >&2
  exit 77
fi
export CBL_MODEL=$model

work=$(mktemp -d /tmp/cbl-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >"$work/install.log"
[[ -f $prefix/include/cacheblend.h ]] || { echo "header not installed" >&2; exit 1; }
pc=$(find "$prefix" -name cacheblend.pc -print -quit)
[[ -n $pc ]] || { echo "cacheblend.pc not installed" >&2; exit 1; }
# The evaluation library (eval/) is for the CLI and the tests: neither it nor the old
# cbl_x_eval_* declarations are installed (issue 12).
evl=$(find "$prefix" -name '*cacheblend_eval*' -o -name 'eval-metrics.h' | head -n 1)
[[ -z $evl ]] || { echo "evaluation library installed: $evl" >&2; exit 1; }
if grep -rq 'cbl_x_eval_' "$prefix/include"; then
  echo "installed headers declare cbl_x_eval_ functions" >&2; exit 1
fi

# 1. find_package
cmake -S "$src/tests/install/consumer" -B "$work/fp" -DCMAKE_PREFIX_PATH="$prefix" \
  -DSAMPLE_SOURCE="$src/samples/c/ask.c" -DCMAKE_BUILD_TYPE=Release >"$work/fp.log"
cmake --build "$work/fp" >>"$work/fp.log"

# 2. pkg-config (the pc file's own -rpath makes it runnable without LD_LIBRARY_PATH)
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
cc -std=c99 -Wall -Wextra -Werror -pedantic "$src/samples/c/ask.c" -o "$work/ask-pc" \
  $(pkg-config --cflags --libs cacheblend)

# Neither binary may resolve libcacheblend from the build tree.
for exe in "$work/fp/ask" "$work/ask-pc"; do
  lib=$(ldd "$exe" | awk '/libcacheblend/ {print $3}')
  [[ $lib == "$prefix"/* ]] || { echo "$exe links $lib, not the installed library" >&2; exit 1; }
done

mkdir -p "$work/docs"
printf 'Mount Kilimanjaro is a dormant volcano in Tanzania. Its highest peak, Uhuru, rises 5,895 metres.\n' \
  >"$work/docs/kilimanjaro.txt"
printf 'Sourdough bread is leavened by wild yeast and lactic acid bacteria.\n' >"$work/docs/bread.txt"
for exe in "$work/fp/ask" "$work/ask-pc"; do
  out=$("$exe" "$work/data-$(basename "$exe")" "$work/docs" "Where is Mount Kilimanjaro?" 2>"$work/err")
  grep -q "citations:" <<<"$out" || { echo "$exe: no citations"; echo "$out"; cat "$work/err"; exit 1; } >&2
  grep -q "kilimanjaro.txt" <<<"$out" || { echo "$exe: wrong citation"; echo "$out"; exit 1; } >&2
  grep -q "TTFT" "$work/err" || { echo "$exe: no stats"; cat "$work/err"; exit 1; } >&2
done
echo "install test: find_package and pkg-config consumers built and answered"
