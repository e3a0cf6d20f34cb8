#!/usr/bin/env python3
"""Retrieval quality on MuSiQue (issue acceptance): ingests the passages of the first N records as
one collection with `cacheblend ingest`, then asks every question with `cacheblend search` and
reports hit@5, hit@10 and MRR@10 per retrieval mode (bm25 always; dense and hybrid when the
embedder is installed). The dataset has no gold passage ids, so a hit is a retrieved chunk that
contains one of the question's answers (case-insensitive, whitespace-normalized).

usage: scripts/bench-retrieval-musique.py [--dataset ../shared/cacheblend_inputs/musique_s.json]
           [--cli build/bin/cacheblend] [--records 100] [--work /tmp/cbl-musique] [--json OUT]
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


def norm(s):
    return re.sub(r"\s+", " ", s.lower()).strip()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default=os.path.join(here, "../../shared/cacheblend_inputs/musique_s.json"))
    ap.add_argument("--cli", default=os.path.join(here, "../build/bin/cacheblend"))
    ap.add_argument("--records", type=int, default=100)
    ap.add_argument("--work", default="/tmp/cbl-musique")
    ap.add_argument("--modes", default="bm25,dense,hybrid")
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    records = json.load(open(a.dataset))[: a.records]
    shutil.rmtree(a.work, ignore_errors=True)
    pdir = os.path.join(a.work, "passages")
    os.makedirs(pdir)
    seen = set()
    for ri, r in enumerate(records):
        ctxs = r["ctxs"]  # a list, or a string holding a Python literal list in some copies
        for pi, c in enumerate(ast.literal_eval(ctxs) if isinstance(ctxs, str) else ctxs):
            text = (c.get("title", "") + "\n\n" + c["text"]).strip()
            h = hashlib.sha256(text.encode()).hexdigest()
            if h in seen:
                continue
            seen.add(h)
            with open(os.path.join(pdir, "r%03d-p%02d.txt" % (ri, pi)), "w") as f:
                f.write(text + "\n")
    data = os.path.join(a.work, "data")
    out = subprocess.run([a.cli, "ingest", "--data", data, "--collection", "musique", "--json",
                          pdir], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("ingest failed: " + out.stderr)
    rep = json.loads(out.stdout)
    print("ingested %d passages -> %d documents, %d chunks; notices: %s"
          % (len(seen), rep["documents"], rep["chunks"], rep["notices"]))

    results = {}
    for mode in a.modes.split(","):
        hit5 = hit10 = rr = 0.0
        n = 0
        ran = mode
        for r in records:
            answers = [norm(x) for x in r["answers"] if x.strip()]
            q = subprocess.run([a.cli, "search", "--data", data, "--k", "10", "--mode", mode,
                                "--collection", "musique", "--json", r["question"]],
                               capture_output=True, text=True)
            if q.returncode != 0:
                ran = None
                print("%s: unavailable (%s)" % (mode, q.stderr.strip()))
                break
            res = json.loads(q.stdout)
            ran = res["mode"]
            rank = 0
            for i, h in enumerate(res["hits"]):
                t = norm(h["text"])
                if any(ans in t for ans in answers):
                    rank = i + 1
                    break
            n += 1
            hit5 += 1 if 0 < rank <= 5 else 0
            hit10 += 1 if 0 < rank <= 10 else 0
            rr += 1.0 / rank if rank else 0
        if not ran or n == 0:
            continue
        if ran != mode:
            print("%s: ran as %s (no embedder), skipped" % (mode, ran))
            continue
        results[mode] = {"n": n, "hit@5": hit5 / n, "hit@10": hit10 / n, "mrr@10": rr / n}
        print("%-7s n=%d hit@5 %.3f hit@10 %.3f MRR@10 %.3f"
              % (mode, n, hit5 / n, hit10 / n, rr / n))
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
