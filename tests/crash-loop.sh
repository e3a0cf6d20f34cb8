#!/usr/bin/env bash
# Crash-test loop for one data directory shared by two writers (issue 17): each round starts two
# CLI processes doing random ingest (with or without --precompute), remove and re-ingest work on
# the same data directory while the document folders change under them, and SIGKILLs one or both
# at a random moment. After the last round one resume run (`ingest` of the folders) must finish
# the job, `ingest --check` must be clean, and every document must be found: by its unique word
# (BM25), by dense search (its vectors are in the index) and, for a few, by `ask`'s citations.
#
#   bash tests/crash-loop.sh [--rounds N] [--seed S] [--keep]
#
# CI runs it briefly through ctest (test_crash_loop: a few rounds); by hand, run it long
# (--rounds 500). Needs the CLI (CBL_CLI, default build/bin/cacheblend), a model (CBL_MODEL,
# default smollm2-135m) and the embedder (CBL_EMBED_MODEL, as for every CLI test). Prints the
# number of kills survived.
set -euo pipefail

rounds=8
seed=$$
keep=0
while (($#)); do
  case "$1" in
    --rounds) rounds=$2; shift ;;
    --seed) seed=$2; shift ;;
    --keep) keep=1 ;;
    *) echo "crash-loop: error: unknown argument $1 (use --rounds N, --seed S, --keep)" >&2; exit 2 ;;
  esac
  shift
done
root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cli=${CBL_CLI:-$root_dir/build/bin/cacheblend}
[[ -x $cli ]] || { echo "crash-loop: error: no CLI at $cli (build first or set CBL_CLI)" >&2; exit 2; }
CBL_MODEL=${CBL_MODEL:-smollm2-135m}  # the test suite's model (scripts/fetch-model.sh smollm2-135m)

RANDOM=$seed
work=$(mktemp -d /tmp/cbl-crash-loop-XXXXXX)
cleanup() { ((keep)) && echo "crash-loop: kept $work" >&2 || rm -rf "$work"; }
trap cleanup EXIT
data=$work/data
words=(river stone maple copper violet harbor signal lantern meadow orbit quartz willow)

# Document i of folder f: a unique word zq<f><i> plus shared vocabulary, version v.
write_doc() {
  local f=$1 i=$2 v=$3 p w
  local s="Document $f $i version $v mentions zq$f$i. "
  for p in 1 2 3; do
    for w in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do
      s+="${words[RANDOM % ${#words[@]}]} "
    done
    s+=$'\n\n'
  done
  printf '%s' "$s" > "$work/$f/doc$i.txt"
}
for f in a b; do
  mkdir -p "$work/$f"
  for i in 0 1 2 3 4 5; do write_doc "$f" "$i" 0; done
done

# One thread each: two writers on two cores, and the killer's timing stays meaningful.
cb() {
  local cmd=$1
  shift
  case $cmd in
    ingest | ask) "$cli" "$cmd" --model "$CBL_MODEL" --threads 1 "$@" ;;
    *) "$cli" "$cmd" --model "$CBL_MODEL" "$@" ;;
  esac
}

# One writer's random job (runs in the background; killed at a random moment).
job() {
  local f=${1} op=$((RANDOM % 4))
  case $op in
    0) cb ingest --data "$data" "$work/$f" ;;
    1) cb ingest --data "$data" "$work/$f" --precompute ;;
    # A document never ingested or removed already is refused (exit 1, nothing removed).
    2) cb ingest --data "$data" --remove "$work/$f/doc$((RANDOM % 6)).txt" 2> "$work/remove-$f.err" ||
         grep -q "is not a document of" "$work/remove-$f.err" ;;
    3) cb ingest --data "$data" "$work/a" "$work/b" --precompute ;;
  esac
}

kills=0
for ((r = 1; r <= rounds; ++r)); do
  # The folders change between rounds: an edited document, sometimes a deleted or a new one.
  f=$([[ $((RANDOM % 2)) == 0 ]] && echo a || echo b)
  write_doc "$f" $((RANDOM % 6)) "$r"
  if ((RANDOM % 3 == 0)); then rm -f "$work/$f/doc$((6 + RANDOM % 2)).txt"; fi
  if ((RANDOM % 3 == 0)); then write_doc "$f" $((6 + RANDOM % 2)) "$r"; fi
  job a > "$work/job1.log" 2>&1 & p1=$!
  job b > "$work/job2.log" 2>&1 & p2=$!
  sleep "$((RANDOM % 30 / 10)).$((RANDOM % 10))"
  for p in $p1 $p2; do
    # The job is a subshell whose child is the CLI: kill the CLI itself (killing only the subshell
    # left it running as an orphan that wrote after the resume run, e.g. a late --remove).
    if ((RANDOM % 3 != 0)) && kill -0 "$p" 2>/dev/null &&
      { pkill -KILL -P "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; }; then
      kills=$((kills + 1))
    fi
  done
  for p in $p1 $p2; do
    rc=0
    { wait "$p"; } 2>/dev/null || rc=$?
    # 137: killed by us. Anything else non-zero is a failure of a job that was let run.
    if ((rc != 0 && rc != 137)); then
      echo "crash-loop: round $r: a writer failed (exit $rc):" >&2
      cat "$work/job1.log" "$work/job2.log" >&2
      exit 1
    fi
  done
done

# Resume: one run finishes what the killed ones left, then everything must agree.
cb ingest --data "$data" "$work/a" "$work/b" --precompute > "$work/resume.log" 2>&1 ||
  { echo "crash-loop: resume run failed:" >&2; cat "$work/resume.log" >&2; exit 1; }
if ! cb ingest --data "$data" --check > "$work/check.log" 2>&1; then
  echo "crash-loop: --check is not clean after the resume run:" >&2
  cat "$work/check.log" >&2
  exit 1
fi
docs=("$work"/a/*.txt "$work"/b/*.txt)
cb search --data "$data" --mode dense --k 1000 "river stone maple" --json > "$work/dense.json"
dense=$(python3 -c 'import json,sys; print(len({h["uri"] for h in json.load(open(sys.argv[1]))["hits"]}))' \
  "$work/dense.json")
if ((dense != ${#docs[@]})); then
  echo "crash-loop: dense search finds $dense documents, the folders hold ${#docs[@]}" >&2
  # What is missing, and whether BM25 (the catalog) has it: evidence for the next person.
  for d in "${docs[@]}"; do
    grep -qF "\"$d\"" "$work/dense.json" && continue
    f=$(basename "$(dirname "$d")")
    base=$(basename "$d" .txt)
    echo "  not in dense hits: $d (bm25 for zq$f${base#doc}:" \
      "$(cb search --data "$data" --mode bm25 --k 1 "zq$f${base#doc}" --json | head -c 300))" >&2
  done
  cat "$work/check.log" "$work/resume.log" >&2
  exit 1
fi
for d in "${docs[@]}"; do
  base=$(basename "$d" .txt)
  f=$(basename "$(dirname "$d")")
  top=$(cb search --data "$data" --mode bm25 --k 1 "zq$f${base#doc}" --json |
    python3 -c 'import json,sys; h=json.load(sys.stdin)["hits"]; print(h[0]["uri"] if h else "")')
  if [[ $top != "$d" ]]; then
    echo "crash-loop: zq$f${base#doc} finds '$top', not $d" >&2
    exit 1
  fi
done
# A few asks: the document holding the unique word is among the citations.
for d in "${docs[0]}" "${docs[-1]}"; do
  base=$(basename "$d" .txt)
  f=$(basename "$(dirname "$d")")
  cited=$(cb ask --data "$data" --max-tokens 4 --json "Which document mentions zq$f${base#doc}?" |
    python3 -c 'import json,sys; print("\n".join(c["uri"] for c in json.load(sys.stdin)["citations"]))')
  grep -qxF "$d" <<< "$cited" || { echo "crash-loop: ask does not cite $d" >&2; exit 1; }
done
echo "crash-loop: $rounds rounds, $kills kills survived, ${#docs[@]} documents consistent and found (seed $seed)"
