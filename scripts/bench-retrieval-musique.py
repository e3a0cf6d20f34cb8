#!/usr/bin/env python3
"""Retrieval quality on MuSiQue (issue acceptance): ingests the passages of the first N records as
one collection with `cacheblend ingest`, then asks every record's question with `cacheblend search`
in each mode (dense, bm25, hybrid) and reports, over the top 10 passages:

  hit@5, hit@10, MRR@10  a retrieved passage is one of the record's own 10 (its `ctxs`); the
                         dataset marks no gold passage, so the record's own pool is the target
                         among all N*10 passages
  ans@5, ans@10          a retrieved passage contains one of the record's answers
                         (case-insensitive, whitespace-normalized): a stricter proxy for "the
                         passage that answers it", kept to compare with earlier BM25-only runs

A passage shared by several records counts as their own for each of them. A passage split into
several chunks counts once, at the rank of its best chunk.

usage: scripts/bench-retrieval-musique.py [--dataset ../shared/cacheblend_inputs/musique_s.json]
           [--cli build/bin/cacheblend] [--records 100] [--work /tmp/cbl-musique]
           [--modes dense,bm25,hybrid] [--json OUT]
"""
import argparse
import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

TOP = 10


def norm(s):
    return re.sub(r"\s+", " ", s.lower()).strip()


def write_passages(records, pdir):
    """One file per distinct passage; returns {file name: set of record indices that hold it}."""
    owner_file = {}  # passage sha256 -> file name
    owners = {}
    for ri, r in enumerate(records):
        ctxs = r["ctxs"]  # a list, or a string holding a Python literal list in some copies
        for pi, c in enumerate(ast.literal_eval(ctxs) if isinstance(ctxs, str) else ctxs):
            text = (c.get("title", "") + "\n\n" + c["text"]).strip()
            h = hashlib.sha256(text.encode()).hexdigest()
            if h not in owner_file:
                owner_file[h] = "r%03d-p%02d.txt" % (ri, pi)
                with open(os.path.join(pdir, owner_file[h]), "w") as f:
                    f.write(text + "\n")
            owners.setdefault(owner_file[h], set()).add(ri)
    return owners


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default=os.path.join(here, "../../shared/cacheblend_inputs/musique_s.json"))
    ap.add_argument("--cli", default=os.path.join(here, "../build/bin/cacheblend"))
    ap.add_argument("--records", type=int, default=100)
    ap.add_argument("--work", default="/tmp/cbl-musique")
    ap.add_argument("--modes", default="dense,bm25,hybrid")
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    records = json.load(open(a.dataset))[: a.records]
    shutil.rmtree(a.work, ignore_errors=True)
    pdir = os.path.join(a.work, "passages")
    os.makedirs(pdir)
    owners = write_passages(records, pdir)
    data = os.path.join(a.work, "data")
    out = subprocess.run([a.cli, "ingest", "--data", data, "--collection", "musique", "--json",
                          pdir], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("ingest failed: " + out.stderr)
    rep = json.loads(out.stdout)
    print("records %d: %d distinct passages -> %d documents, %d chunks; notices: %s"
          % (len(records), len(owners), rep["documents"], rep["chunks"], rep["notices"]))

    # Chunks per passage bound how many chunk hits make TOP distinct passages.
    depth = TOP * max(1, -(-rep["chunks"] // max(1, rep["documents"])))
    results = {}
    for mode in a.modes.split(","):
        sums = {"hit@5": 0.0, "hit@10": 0.0, "mrr@10": 0.0, "ans@5": 0.0, "ans@10": 0.0}
        n = 0
        ran = mode
        for ri, r in enumerate(records):
            answers = [norm(x) for x in r["answers"] if x.strip()]
            q = subprocess.run([a.cli, "search", "--data", data, "--k", str(depth), "--mode",
                                mode, "--collection", "musique", "--json", r["question"]],
                               capture_output=True, text=True)
            if q.returncode != 0:
                ran = None
                print("%s: unavailable (%s)" % (mode, q.stderr.strip()))
                break
            res = json.loads(q.stdout)
            ran = res["mode"]
            passages = []  # (file name, text), distinct, best chunk first
            for h in res["hits"]:
                name = os.path.basename(h["uri"])
                if name not in [p[0] for p in passages]:
                    passages.append((name, h["text"]))
            passages = passages[:TOP]
            own = next((i + 1 for i, (name, _) in enumerate(passages)
                        if ri in owners.get(name, ())), 0)
            ans = next((i + 1 for i, (_, t) in enumerate(passages)
                        if any(x in norm(t) for x in answers)), 0)
            n += 1
            sums["hit@5"] += 0 < own <= 5
            sums["hit@10"] += 0 < own <= 10
            sums["mrr@10"] += 1.0 / own if own else 0
            sums["ans@5"] += 0 < ans <= 5
            sums["ans@10"] += 0 < ans <= 10
        if not ran or n == 0:
            continue
        if ran != mode:
            print("%s: ran as %s (no embedder), skipped" % (mode, ran))
            continue
        results[mode] = dict({k: v / n for k, v in sums.items()}, n=n)
        print("%-7s n=%d  hit@5 %.3f  hit@10 %.3f  MRR@10 %.3f  |  ans@5 %.3f  ans@10 %.3f"
              % (mode, n, *(results[mode][k] for k in
                            ("hit@5", "hit@10", "mrr@10", "ans@5", "ans@10"))))
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
