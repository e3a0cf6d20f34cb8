#!/usr/bin/env bash
# What an installed user gets besides the library (issue 13, item 5): installs the build into a
# temporary prefix and checks that the licence texts, the changelog and the man page are there,
# that the man page renders without warnings, and that the model fetcher the error messages name
# is installed, prints its usage and resolves a cached model name (no network: the cache holds a
# file with a verified-marker, as the fetcher leaves it).
#   installed-files.sh BUILD_DIR
set -euo pipefail
build=$1

work=$(mktemp -d /tmp/cbl-installed-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "installed-files: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log"

doc=$prefix/share/doc/cacheblend
for f in LICENSE THIRD_PARTY_NOTICES.md CHANGELOG.md README.md; do
  [[ -s $doc/$f ]] || fail "$doc/$f not installed"
done

# The man page: installed, generated from this CLI's --help (every command has its section), and
# clean for groff's warnings (and mandoc's linter where it is installed).
page=$prefix/share/man/man1/cacheblend.1
[[ -s $page ]] || fail "$page not installed (is help2man installed? scripts/install-deps.sh)"
cli=$prefix/bin/cacheblend
while read -r name _; do
  grep -q "^\.SS $name\$" "$page" || fail "the man page has no section for '$name'"
done < <("$cli" --help | sed -n '/^commands:/,/^$/p' | sed '1d;/^$/d')
grep -q 'kv\\-budget' "$page" || fail "the man page lacks the options of the commands"
warnings=$(groff -ww -z -man "$page" 2>&1) || fail "groff failed on $page: $warnings"
[[ -z $warnings ]] || fail "groff warns about $page: $warnings"
if command -v mandoc >/dev/null; then
  mandoc -T lint -W warning "$page" || fail "mandoc -T lint warns about $page"
fi
rendered=$(MANWIDTH=100 man -l "$page" 2>"$work/man.err") || fail "man -l failed: $(cat "$work/man.err")"
[[ ! -s $work/man.err ]] || fail "man -l warns: $(cat "$work/man.err")"
grep -q "cacheblend docs --data DIR" <<<"$rendered" || fail "man -l output lacks 'docs'"

# The fetch command: installed, executable, with the registry it reads.
fetch=$prefix/bin/cacheblend-fetch-model
[[ -x $fetch ]] || fail "$fetch not installed"
usage=$("$fetch" --help) || fail "$fetch --help failed"
grep -q "cacheblend-fetch-model \[NAME\]" <<<"$usage" || fail "no usage from --help: $usage"
if out=$("$fetch" no-such-model 2>&1); then fail "an unknown name succeeded: $out"; fi
grep -q "unknown model 'no-such-model' (names: smollm2-135m" <<<"$out" || fail "unknown name: $out"

# A cached model resolves to its path without downloading: the file plus the marker the fetcher
# writes after checking the sha256 ("<size> <mtime> <sha256>").
export XDG_CACHE_HOME=$work/cache
models=$XDG_CACHE_HOME/cacheblend/models
mkdir -p "$models"
registry=$prefix/share/cacheblend/model-registry.tsv
read -r file sha < <(awk -F'\t+' '$1 == "model" && $2 == "smollm2-135m" { print $3, $5 }' "$registry")
echo "stand-in" >"$models/$file"
echo "$(stat -c '%s %Y' "$models/$file") $sha" >"$models/$file.sha256-ok"
got=$("$fetch" smollm2-135m) || fail "resolving a cached name failed"
[[ $got == "$models/$file" ]] || fail "smollm2-135m resolved to '$got', not $models/$file"

# The missing-model error of the installed CLI names that installed command.
rm -f "$models"/*
if out=$("$cli" tokenize --model qwen2.5-coder-0.5b --text hi 2>&1); then
  fail "a missing model succeeded: $out"
fi
grep -q "with cacheblend-fetch-model qwen2.5-coder-0.5b" <<<"$out" || fail "error: $out"
out=$("$cli" models)
grep -q "fetch a model: cacheblend-fetch-model NAME" <<<"$out" || fail "models: $out"
echo "installed files: docs, man page, cacheblend-fetch-model"
