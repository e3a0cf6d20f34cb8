#!/usr/bin/env python3
"""Builds the licence-QA evaluation dataset for `cacheblend eval` (README, "Licence-QA dataset").

Short RAG prompts from text every Debian machine has: the licences in /usr/share/common-licenses.
Each licence named in the question file is cut into chunks of about --words words (on paragraph
boundaries, long paragraphs on sentence boundaries). Each question becomes one record in the schema
of CacheBlend's musique_s.json, {ctxs: [{title, text}] x --chunks, question, answers}: the chunk
that holds the question's anchor phrase plus distractor chunks, drawn with a seeded generator from
the same licence (up to two) and from the other licences, in a seeded shuffled order. No
distractor contains the anchor or a gold answer, so exactly one passage answers the question.

The question file (scripts/data/licence-qa.json) records anchors, not word offsets, so the dataset
builds from any Debian version's texts as long as each anchor and its answer are still there; the
script fails (exit 1, naming the question) when a licence file, an anchor or an answer is missing.
The output is deterministic for given texts, question file and options. Python standard library
only.

  python3 scripts/make-licence-qa.py                    # writes the default path, prints a summary
  python3 scripts/make-licence-qa.py --out /tmp/licence-qa.json --limit 1
"""

import argparse
import json
import os
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_QUESTIONS = HERE / "data" / "licence-qa.json"
DEFAULT_LICENCES = Path("/usr/share/common-licenses")
SEED_SALT = "licence-qa"
MAX_SAME_LICENCE_DISTRACTORS = 2


class BuildError(Exception):
    pass


def default_out():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "cacheblend", "datasets", "licence-qa.json")


# ---- text ----

_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'",
                         "\u00a0": " ", "\u2013": "-", "\u2014": "--"})
_RULE = re.compile(r"^\s*[-=_*~]{4,}\s*$")  # "-----" underlines under headings
# A sentence ends at . ; : ? or ! followed by white space and something that starts a sentence.
_SENTENCE_END = re.compile(r"(?<=[.;:?!])\s+(?=[\"'(\[A-Z0-9])")


def normalize(text):
    """The form anchors and answers are matched in: straight quotes, one space, lower case."""
    return " ".join(text.translate(_QUOTES).split()).lower()


def paragraphs(text):
    """Blank-line separated paragraphs, each reflowed onto one line (licences are hard-wrapped)."""
    out, cur = [], []
    for line in text.translate(_QUOTES).replace("\f", "\n").splitlines():
        if _RULE.match(line):
            continue
        if line.strip():
            cur.append(line.strip())
        elif cur:
            out.append(" ".join(" ".join(cur).split()))
            cur = []
    if cur:
        out.append(" ".join(" ".join(cur).split()))
    return out


def units(paras, words):
    """Paragraphs, with any longer than `words` cut into sentences (and an overlong sentence cut
    into runs of `words` words): (text, word count, starts a paragraph)."""
    out = []
    for p in paras:
        n = len(p.split())
        if n <= words:
            out.append((p, n, True))
            continue
        first = True
        for s in _SENTENCE_END.split(p):
            w = s.split()
            for k in range(0, len(w), words):
                piece = w[k:k + words]
                out.append((" ".join(piece), len(piece), first))
                first = False
    return out


def chunk_text(text, words):
    """Greedy packing of units into chunks of about `words` words: a chunk closes before the unit
    that would take it further from `words` than it is; a last chunk under 40% of `words` joins
    the one before it. Paragraphs are separated by a blank line inside a chunk."""
    chunks, cur, n = [], [], 0

    def close():
        nonlocal cur, n
        if cur:
            chunks.append((cur, n))
        cur, n = [], 0

    for u, w, para_start in units(paragraphs(text), words):
        if cur and abs(n + w - words) > abs(n - words):
            close()
        cur.append((u, para_start))
        n += w
    close()
    if len(chunks) > 1 and chunks[-1][1] < 0.4 * words:
        last, m = chunks.pop()
        prev, k = chunks.pop()
        chunks.append((prev + last, k + m))
    out = []
    for parts, _ in chunks:
        s = ""
        for u, para_start in parts:
            s += ("\n\n" if para_start else " ") + u if s else u
        out.append(s)
    return out


def contains(haystack_norm, needle):
    """Whole-word, normalized containment (so the answer "100" does not match "1000")."""
    n = normalize(needle)
    if not n:
        return False
    return re.search(r"(?<!\w)" + re.escape(n) + r"(?!\w)", haystack_norm) is not None


# ---- dataset ----

def load_questions(path):
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except OSError as e:
        raise BuildError(f"cannot read the question file {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise BuildError(f"{path}: not valid JSON: {e}")
    licences = spec.get("licences")
    questions = spec.get("questions")
    if not isinstance(licences, dict) or not licences:
        raise BuildError(f"{path}: expected a 'licences' object of file name -> title")
    if not isinstance(questions, list) or not questions:
        raise BuildError(f"{path}: expected a non-empty 'questions' list")
    ids = set()
    for i, q in enumerate(questions):
        where = f"{path}: question {i}"
        for key in ("id", "licence", "anchor", "question"):
            if not isinstance(q.get(key), str) or not q[key].strip():
                raise BuildError(f"{where}: '{key}' must be a non-empty string")
        answers = q.get("answers")
        if not isinstance(answers, list) or not answers or \
                not all(isinstance(a, str) and a.strip() for a in answers):
            raise BuildError(f"{where} ({q['id']}): 'answers' must be a non-empty list of strings")
        if q["id"] in ids:
            raise BuildError(f"{where}: duplicate id '{q['id']}'")
        ids.add(q["id"])
        if q["licence"] not in licences:
            raise BuildError(f"{where} ({q['id']}): licence '{q['licence']}' is not in 'licences'")
    return licences, questions


def load_corpus(licence_dir, licences, words):
    """{file name: [chunk, ...]} for every licence, in the question file's order."""
    corpus = {}
    for name in licences:
        path = Path(licence_dir) / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            raise BuildError(f"licence file {path} is missing or unreadable: {e.strerror}")
        chunks = chunk_text(text, words)
        if not chunks:
            raise BuildError(f"licence file {path} has no text")
        corpus[name] = chunks
    return corpus


def build(licences, questions, corpus, n_ctx, seed):
    # Every chunk of the corpus, in a fixed order: (licence, index, text, normalized text).
    pool = [(lic, i, c, normalize(c)) for lic, chunks in corpus.items()
            for i, c in enumerate(chunks)]
    records = []
    for q in questions:
        lic, qid = q["licence"], q["id"]
        hits = [p for p in pool if p[0] == lic and contains(p[3], q["anchor"])]
        if not hits:
            whole = normalize(" ".join(corpus[lic]))
            if contains(whole, q["anchor"]):
                raise BuildError(f"question {qid}: the anchor {q['anchor']!r} spans two chunks "
                                 f"of {lic}; choose a shorter anchor")
            raise BuildError(f"question {qid}: anchor {q['anchor']!r} not found in {lic}")
        if len(hits) > 1:
            raise BuildError(f"question {qid}: anchor {q['anchor']!r} is in {len(hits)} chunks "
                             f"of {lic}; choose a longer anchor")
        gold = hits[0]
        if not contains(gold[3], q["answers"][0]):
            raise BuildError(f"question {qid}: the answer {q['answers'][0]!r} is not in the "
                             f"chunk of {lic} that holds the anchor")

        def clean(p):
            return p is not gold and not contains(p[3], q["anchor"]) and \
                not any(contains(p[3], a) for a in q["answers"])

        same = [p for p in pool if p[0] == lic and clean(p)]
        other = [p for p in pool if p[0] != lic and clean(p)]
        rng = random.Random(f"{SEED_SALT}:{seed}:{qid}")
        k_same = min(MAX_SAME_LICENCE_DISTRACTORS, len(same), n_ctx - 1)
        picked = rng.sample(same, k_same)
        if len(other) < n_ctx - 1 - k_same:
            raise BuildError(f"question {qid}: only {len(same) + len(other)} distractor chunks "
                             f"qualify; {n_ctx - 1} are needed")
        picked += rng.sample(other, n_ctx - 1 - k_same)
        ctxs = [gold] + picked
        rng.shuffle(ctxs)
        records.append({
            "id": qid,
            "licence": lic,
            "question": q["question"],
            "answers": list(q["answers"]),
            "gold_ctx": ctxs.index(gold),
            "ctxs": [{"title": licences[p[0]], "text": p[2]} for p in ctxs],
        })
    return records


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Build the licence-QA dataset (musique_s.json schema) for cacheblend eval.")
    ap.add_argument("--licences", default=str(DEFAULT_LICENCES),
                    help="folder of licence texts (default %(default)s)")
    ap.add_argument("--questions", default=str(DEFAULT_QUESTIONS),
                    help="question file (default scripts/data/licence-qa.json)")
    ap.add_argument("--out", default=default_out(),
                    help="dataset to write (default ${XDG_CACHE_HOME:-~/.cache}/cacheblend/"
                         "datasets/licence-qa.json)")
    ap.add_argument("--words", type=int, default=380, help="words per chunk (default 380)")
    ap.add_argument("--chunks", type=int, default=6, help="passages per record (default 6)")
    ap.add_argument("--seed", type=int, default=0, help="distractor and order seed (default 0)")
    ap.add_argument("--limit", type=int, default=0, help="write only the first N records")
    args = ap.parse_args(argv)
    if args.words < 20:
        ap.error("--words must be at least 20")
    if args.chunks < 1:
        ap.error("--chunks must be at least 1")
    if args.limit < 0:
        ap.error("--limit must not be negative")

    try:
        licences, questions = load_questions(args.questions)
        corpus = load_corpus(args.licences, licences, args.words)
        records = build(licences, questions, corpus, args.chunks, args.seed)
    except BuildError as e:
        print(f"make-licence-qa: error: {e}", file=sys.stderr)
        return 1
    if args.limit:
        records = records[:args.limit]

    out = Path(args.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(records, f, ensure_ascii=False, indent=1)
            f.write("\n")
        os.replace(tmp, out)
    except OSError as e:
        print(f"make-licence-qa: error: cannot write {out}: {e.strerror}", file=sys.stderr)
        return 1

    sizes = [len(c.split()) for chunks in corpus.values() for c in chunks]
    per_lic = {}
    for r in records:
        per_lic[r["licence"]] = per_lic.get(r["licence"], 0) + 1
    words_per_record = [sum(len(c["text"].split()) for c in r["ctxs"]) for r in records]
    print(f"licence-qa: {len(records)} records x {args.chunks} passages -> {out}")
    print(f"  corpus: {len(corpus)} licences from {args.licences}, {len(sizes)} chunks of "
          f"{min(sizes)}-{max(sizes)} words (mean {sum(sizes) / len(sizes):.0f}, target "
          f"{args.words})")
    print(f"  words per record: {min(words_per_record)}-{max(words_per_record)} "
          f"(mean {sum(words_per_record) / len(words_per_record):.0f})")
    print("  questions per licence: " +
          ", ".join(f"{k} {v}" for k, v in sorted(per_lic.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
