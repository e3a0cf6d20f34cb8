#!/usr/bin/env bash
# What the shared library exports: only cbl_ (and CBL_) symbols, and no evaluation code. The
# metrics and dataset prompts live in the eval library (eval/), which the CLI links statically;
# the shipped library must hold neither the old cbl_x_eval_* entry points nor, even hidden, the
# cacheblend::eval functions behind them.
#   exported-symbols.sh path/to/libcacheblend.so
set -euo pipefail
lib=$1

exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}')
# An empty list would pass every check below: nm failing or reading the wrong file is an error.
grep -q '^cbl_model_load$' <<<"$exported" || { echo "$lib: cbl_model_load not exported" >&2; exit 1; }

stray=$(grep -v -e '^cbl_' -e '^CBL_' -e '^_init$' -e '^_fini$' <<<"$exported" || true)
[[ -z $stray ]] || { echo "exported symbols outside cbl_:" >&2; echo "$stray" >&2; exit 1; }

eval_exports=$(grep '^cbl_x_eval_' <<<"$exported" || true)
[[ -z $eval_exports ]] || { echo "evaluation entry points exported:" >&2; echo "$eval_exports" >&2; exit 1; }

# The full symbol table (hidden symbols too, the library is not stripped in the build tree).
if nm -C "$lib" 2>/dev/null | grep -q 'cacheblend::eval::'; then
    echo "$lib contains evaluation code (cacheblend::eval::):" >&2
    nm -C "$lib" | grep 'cacheblend::eval::' | head >&2
    exit 1
fi
echo "exported symbols: only cbl_, no evaluation code"
