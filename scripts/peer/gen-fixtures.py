#!/usr/bin/env python3
"""Generate tests/data/llama-cpp-parity*.json: llama.cpp's tokenization and greedy decoding of a fixed
set of prompts on one model, the reference our engine is tested against (CI needs no llama.cpp).

    bash scripts/peer/setup-llama-cpp.sh            # once: builds the pinned peer in a venv
    python3 scripts/peer/gen-fixtures.py [--preset P] [--model M] [--out FILE] [--steps 32]

Presets (the model's file and env var; the fixture test tests/model/test_llama_cpp_parity.cpp reads
the same file through the same variable):
    smollm2-135m        CBL_MODEL (else scripts/fetch-model.sh)   -> tests/data/llama-cpp-parity.json
    qwen2.5-coder-0.5b  CBL_QWEN_MODEL   -> tests/data/llama-cpp-parity-qwen2.5-coder-0.5b.json
    qwen2.5-coder-1.5b  CBL_QWEN15_MODEL -> tests/data/llama-cpp-parity-qwen2.5-coder-1.5b.json
A Qwen model without its variable is looked up in ${XDG_CACHE_HOME:-~/.cache}/cacheblend/models/.

Runs under the peer venv's python (re-executes itself there when llama_cpp is not importable).
For every prompt it records the prompt token ids, then decodes greedily one token at a time, taking
the full log-softmax of the logits at every step: chosen id, its log-probability, the top-10
(id, logprob) and the gap between the two best log-probabilities (small gaps are numerical near-ties
where an engine may legitimately choose the other token). Decoding stops after --steps tokens or at
an end-of-generation token, which is then the last step (and not part of `tokens`).
It also records llama.cpp's ids for a set of tokenizer-only strings (TOKENIZER: pre-tokenizer edge
cases, tokenized with add_special = parse_special = false as llama.cpp's test-tokenizer-0 does).
"""
import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _reexec_in_peer_venv():
    venv = os.environ.get("CBL_PEER_VENV") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "cacheblend", "peer-venv")
    py = os.path.join(venv, "bin", "python")
    if os.path.exists(py) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(py, [py] + sys.argv)
    sys.exit("gen-fixtures: error: llama_cpp not importable; run scripts/peer/setup-llama-cpp.sh "
             "(or set CBL_PEER_VENV)")


try:
    import numpy as np
    import llama_cpp
except ImportError:
    _reexec_in_peer_venv()

N_CTX, N_THREADS, N_BATCH, TOP_K = 2048, 2, 512, 10

# ---------------------------------------------------------------------------------------------
# Prompts. Plain prompts are tokenized as llama.cpp's default does (add_special: BOS/EOS as the
# GGUF says, special-token text NOT parsed); chat prompts are rendered with llama.cpp's built-in
# ChatML formatter and tokenized with special tokens parsed.
# ---------------------------------------------------------------------------------------------
PLAIN = [
    # English prose
    ("prose-fox", "prose", "The quick brown fox jumps over the lazy dog. Then it"),
    ("prose-history", "prose", "The Roman Empire was one of the largest empires in history. At its height, it"),
    ("prose-story", "prose", "Once upon a time, in a small village at the edge of a dark forest, there lived"),
    ("prose-science", "prose", "Photosynthesis is the process by which green plants convert sunlight into"),
    ("prose-question", "prose", "Why do cats purr? Scientists have several theories."),
    ("prose-recipe", "prose", "To make a simple tomato sauce, first heat two tablespoons of olive oil in a pan, then"),
    ("prose-letter", "prose", "Dear Ms. Thompson,\n\nThank you for your letter of March 3rd. I am writing to"),
    ("prose-contractions", "prose", "I'm sure you'll agree it's what we'd've done; they're right, aren't they? We'll see."),
    ("prose-long", "prose",
     "Retrieval-augmented generation combines a search system with a language model. When a user asks "
     "a question, the system first finds documents that are likely to contain the answer, then places "
     "the most relevant passages into the model's context together with the question. The model reads "
     "those passages and writes an answer, ideally citing where each fact came from. Because the "
     "passages can change without retraining the model, the approach keeps answers current, and"),
    ("prose-caps", "prose", "WARNING: DO NOT OPERATE THIS MACHINE WITHOUT PROPER TRAINING. Operators must"),
    # Code
    ("code-python", "code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n"),
    ("code-cpp", "code", "#include <vector>\n\ntemplate <typename T>\nT sum(const std::vector<T>& v) {\n    T total{};\n    for (const auto& x : v)"),
    ("code-js", "code", "const fetchUser = async (id) => {\n  const res = await fetch(`/api/users/${id}`);\n  if (!res.ok) {"),
    ("code-rust", "code", "fn main() {\n    let v: Vec<i32> = (1..=10).collect();\n    let evens: Vec<_> = v.iter().filter(|x| *x % 2 == 0)"),
    ("code-go", "code", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfor i := 0; i < 3; i++ {\n\t\tfmt.Println("),
    ("code-sql", "code", "SELECT c.name, COUNT(o.id) AS orders\nFROM customers c\nLEFT JOIN orders o ON o.customer_id = c.id\n"),
    ("code-bash", "code", "#!/usr/bin/env bash\nset -euo pipefail\nfor f in *.txt; do\n  wc -l \"$f\"\n"),
    ("code-html", "code", "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n  <title>"),
    ("code-json", "code", "{\"name\": \"cacheblend\", \"version\": \"0.1.0\", \"dependencies\": {\"faiss\": \"1.7.3\", "),
    ("code-c-comment", "code", "/* Copyright (c) 2026. All rights reserved. */\nstatic int max(int a, int b) { return a > b ? a : b; }\n\nint main(void) {"),
    # Numbers, math, dates
    ("num-arith", "numbers", "12345 + 67890 = 80235\n314 * 271 ="),
    ("num-decimals", "numbers", "Pi is approximately 3.14159265358979, and e is approximately"),
    ("num-dates", "numbers", "The meeting moved from 2024-02-29 09:30 UTC to 03/01/2024 at 14:45, i.e."),
    ("num-money", "numbers", "Total: $1,234,567.89 (incl. 19% VAT = EUR 197,530.86); balance due by"),
    ("num-sci", "numbers", "Avogadro's number is 6.02214076e23 mol^-1 and the speed of light is"),
    ("num-list", "numbers", "1, 1, 2, 3, 5, 8, 13, 21, 34, 55,"),
    ("num-math", "numbers", "Solve for x: 3x^2 - 12x + 9 = 0. Dividing by 3 gives x^2 - 4x + 3 = 0, so"),
    ("num-phone-roman", "numbers", "Call +1 (555) 010-9999 ext. 42 before MMXXVI ends. Chapter XIV begins on page 1024."),
    # Whitespace oddities
    ("ws-leading", "whitespace", "   leading spaces and a   run of    spaces inside"),
    ("ws-tabs", "whitespace", "name\tage\tcity\nAlice\t30\tParis\nBob\t25\t"),
    ("ws-newlines", "whitespace", "First paragraph.\n\n\n\nSecond paragraph after blank lines.\n\n"),
    ("ws-trailing", "whitespace", "Trailing spaces follow this sentence.     "),
    ("ws-crlf", "whitespace", "line one\r\nline two\r\nline three\r\n"),
    ("ws-unicode-spaces", "whitespace", "non\u00a0breaking\u2009thin\u3000ideographic and zero\u200bwidth"),
    ("ws-indent-mix", "whitespace", "if True:\n\tif x:\n        pass\n  \t  # mixed"),
    # Other scripts
    ("script-chinese", "scripts", "人工智能正在改变我们的生活方式。在未来的十年里，"),
    ("script-japanese", "scripts", "東京は日本の首都です。ひらがなとカタカナ、そして漢字を使います。"),
    ("script-korean", "scripts", "안녕하세요! 오늘 날씨가 정말 좋네요. 우리는"),
    ("script-arabic", "scripts", "اللغة العربية هي إحدى أكثر اللغات انتشاراً في العالم، ويتحدث بها"),
    ("script-russian", "scripts", "Москва — столица России. Это крупнейший город страны, в котором"),
    ("script-hindi", "scripts", "भारत एक विशाल देश है। यहाँ कई भाषाएँ बोली जाती हैं, जैसे"),
    ("script-greek-hebrew", "scripts", "Καλημέρα κόσμε! שלום עולם! Greek and Hebrew side by side."),
    ("script-thai", "scripts", "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ"),
    ("script-accents", "scripts", "Café, naïve, façade, Straße, Ærøskøbing, Tiếng Việt, Dvořák, São Paulo"),
    ("script-mixed", "scripts", "English, 中文, русский, العربية, हिन्दी and 日本語 in one line."),
    # Emoji
    ("emoji-basic", "emoji", "I love pizza 🍕 and coffee ☕! Weekend plans: 🏖️🌊☀️"),
    ("emoji-zwj", "emoji", "Family: 👨‍👩‍👧‍👦, couple: 👩‍❤️‍👨, technologist: 🧑🏽‍💻, flags: 🇯🇵 🇧🇷 🏳️‍🌈"),
    ("emoji-only", "emoji", "😀😃😄😁😆😅🤣😂🙂🙃"),
    # URLs and markup
    ("url-links", "urls", "See https://example.com/path/to/page?query=a%20b&lang=en#section-2 or mail admin@example.org for"),
    ("markup-markdown", "urls", "# Title\n\n- **bold** item\n- _italic_ item with `code`\n\n> quote\n\n| a | b |\n|---|---|\n"),
    ("markup-latex", "urls", "The integral $\\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}$ is known as"),
    # Special-token text that must NOT be parsed in plain prompts
    ("special-as-text", "special", "The tag <|im_start|>user is ChatML; <|endoftext|> ends documents."),
]

CHAT = [
    ("chat-capital", [("user", "What is the capital of France?")]),
    ("chat-explain", [("user", "Explain in one sentence why the sky is blue.")]),
    ("chat-system", [("system", "You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
                     ("user", "Give me three tips for staying focused while studying.")]),
    ("chat-system-terse", [("system", "Answer with a single word."), ("user", "What color is grass?")]),
    ("chat-multiturn", [("user", "Hi! Can you help me plan a trip?"),
                        ("assistant", "Of course! Where would you like to go?"),
                        ("user", "Somewhere warm in December, on a small budget.")]),
    ("chat-code", [("user", "Write a Python function that checks whether a string is a palindrome.")]),
    ("chat-math", [("user", "If a train travels 120 km in 1.5 hours, what is its average speed?")]),
    ("chat-french", [("user", "Bonjour ! Peux-tu me donner une recette simple de crêpes ?")]),
    ("chat-chinese", [("user", "请用一句话介绍一下长城。")]),
    ("chat-emoji", [("user", "Describe a perfect day at the beach using emoji 🏖️")]),
    ("chat-summarize", [("system", "You summarize text."),
                        ("user", "Summarize: The mitochondria is an organelle found in most cells. It "
                                 "produces energy in the form of ATP through cellular respiration, and "
                                 "it has its own DNA.")]),
    ("chat-rag", [("system", "Answer the question using only the passages below.\n\n"
                             "Passage 1: The Eiffel Tower was completed in 1889 for the World's Fair.\n"
                             "Passage 2: It is 330 metres tall and stands in Paris."),
                  ("user", "When was the Eiffel Tower completed, and how tall is it?")]),
]


# Tokenizer-only strings (no decoding): the corners of byte-level BPE pre-tokenizers (qwen2 splits
# single digits, matches contractions case-insensitively, keeps one leading non-letter on words and
# peels off the last space of a whitespace run).
TOKENIZER = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\t\n", " \n", "\n ", "   \n  \n",
    "Hello world", " Hello world", "Hello World", " Hello World", " Hello World!", "Hello, world!",
    " the 🐪.py module", "q9z 42abc xyzzy7", "Добър ден, свят", "ភាសាខ្មែរ",
    "🚀 launch 😶\u200d🌫️ fog ✅ done",
    "3", "33", "333", "3333", "33333", "333333", "3333333", "12,345.678", "-0.5e-10", "v1.2.3-rc4",
    "I'M HERE, YOU'RE THERE, HE'S, WE'VE, THEY'LL, I'D, DON'T", "it's 'quoted' and ''double''",
    "rock'n'roll o'clock 'tis", "ﬁ ligature, Ａ full-width, ① circled, Ⅻ roman, ½ fraction",
    "a\u0301 e\u0300 (combining marks) and \u00e9 (precomposed)", "x\u200by\u200cz\u200dw\ufeffv",
    "foo.bar_baz-qux::quux->corge", "$$$ ### !!! ??? ... ;;; ,,, ((( )))", "__init__(self, *args, **kwargs)",
    "    indented\n\tTabbed\n  \t mixed", "trailing   \n\n   \n", "\r\n\r\n\r", "a\x00b\x01c\x7f",
    "<|im_start|>system<|im_end|><|endoftext|> as plain text", "<|fim_prefix|>def f():<|fim_suffix|>",
    "中文句子，包括标点符号。还有English混合",
    "日本語のテキスト：ひらがな、カタカナ、漢字。", "한국어 텍스트와 숫자 123",
    "\U0001f9d1\U0001f3fd\u200d\U0001f4bb\U0001f1ef\U0001f1f5\U0001f3f3\ufe0f\u200d\U0001f308",
    "\u00a0\u2009\u3000\u2028\u2029\u0085", "ǅ ǈ ǋ ǲ titlecase, ʰʲ modifiers, Ⓐ symbol",
    "https://example.com/a?b=1&c=%20#d", "user@example.org", "C:\\Users\\name\\file.txt",
    "0x1F 0b1010 1e9 1_000_000", "ĠĊ ĉ (byte-level symbols as text)",
]


def render_chatml(messages):
    """llama.cpp's built-in (non-Jinja) ChatML formatting, with the assistant opening appended."""
    out = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in messages)
    return out + "<|im_start|>assistant\n"


def render_with_llama_cpp(template, messages):
    """The same through llama_chat_apply_template, to prove render_chatml matches llama.cpp."""
    arr = (llama_cpp.llama_chat_message * len(messages))()
    keep = []
    for i, (role, content) in enumerate(messages):
        r, c = role.encode(), content.encode()
        keep += [r, c]
        arr[i].role, arr[i].content = r, c
    size = 4096
    while True:
        buf = (llama_cpp.ctypes.c_char * size)()
        n = llama_cpp.llama_chat_apply_template(template, arr, len(messages), True, buf, size)
        if n < 0:
            raise RuntimeError("llama_chat_apply_template failed")
        if n <= size:
            return bytes(buf[:n]).decode()
        size = n


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# name -> (env var, model file, fixture file)
PRESETS = {
    "smollm2-135m": ("CBL_MODEL", "SmolLM2-135M-Instruct.Q4_1.gguf", "llama-cpp-parity.json"),
    "qwen2.5-coder-0.5b": ("CBL_QWEN_MODEL", "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
                           "llama-cpp-parity-qwen2.5-coder-0.5b.json"),
    "qwen2.5-coder-1.5b": ("CBL_QWEN15_MODEL", "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
                           "llama-cpp-parity-qwen2.5-coder-1.5b.json"),
}


def preset_model(preset):
    # The preset's environment variable, else the registry model of that name (the preset names
    # are model names), which fetch-model.sh downloads once and turns into a path.
    env, _, _ = PRESETS[preset]
    if os.environ.get(env):
        return os.environ[env]
    return subprocess.run(["bash", os.path.join(REPO, "scripts", "fetch-model.sh"), preset],
                          check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


def peer_info():
    lib_dir = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    info = {"llama_cpp_python": llama_cpp.__version__,
            "system_info": llama_cpp.llama_print_system_info().decode().strip()}
    try:
        ggml = llama_cpp.ctypes.CDLL(os.path.join(lib_dir, "libggml-base.so"))
        for fn in ("ggml_version", "ggml_commit"):
            f = getattr(ggml, fn)
            f.restype = llama_cpp.ctypes.c_char_p
            info[fn] = f().decode()
    except (OSError, AttributeError):
        pass
    stamp = os.path.join(sys.prefix, "cacheblend-peer.txt")  # written by setup-llama-cpp.sh
    if os.path.exists(stamp):
        with open(stamp) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                if k in ("cmake_args", "compiler"):
                    info["build_" + k] = v
    return info


def log_softmax(logits):
    x = np.asarray(logits, dtype=np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="smollm2-135m",
                    help="which model and fixture file (default: smollm2-135m)")
    ap.add_argument("--model", default=None, help="GGUF (default: the preset's, see above)")
    ap.add_argument("--out", default=None, help="fixture file (default: the preset's in tests/data)")
    ap.add_argument("--steps", type=int, default=32, help="greedy tokens per prompt")
    args = ap.parse_args()
    model = args.model or preset_model(args.preset)
    expect_file = PRESETS[args.preset][1]
    if args.out is None:
        if os.path.basename(model) != expect_file:
            sys.exit(f"gen-fixtures: error: {model} is not {expect_file} (preset {args.preset}); "
                     "pass --out to write a fixture for another model")
        args.out = os.path.join(REPO, "tests", "data", PRESETS[args.preset][2])

    global _quiet  # the C side keeps the callback pointer: keep the Python object alive
    _quiet = llama_cpp.llama_log_callback(lambda level, text, user_data: None)
    llama_cpp.llama_log_set(_quiet, llama_cpp.ctypes.c_void_p(0))
    llm = llama_cpp.Llama(model_path=model, n_ctx=N_CTX, n_batch=N_BATCH, n_ubatch=N_BATCH,
                          n_threads=N_THREADS, n_threads_batch=N_THREADS, flash_attn=True,
                          verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llm.n_vocab()
    eog = [t for t in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, t)]
    template = llm.metadata.get("tokenizer.chat_template", "").encode()

    def decode_case(prompt_tokens):
        llm.reset()
        llm.eval(prompt_tokens)
        steps, tokens, stop = [], [], "length"
        for _ in range(args.steps):
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))
            lp = log_softmax(logits)
            top = np.argsort(-lp, kind="stable")[:TOP_K]
            tok = int(top[0])  # greedy; ties go to the lower id
            steps.append({"id": tok, "logprob": round(float(lp[tok]), 5),
                          "top": [[int(t), round(float(lp[t]), 5)] for t in top],
                          "gap": round(float(lp[top[0]] - lp[top[1]]), 5)})
            if tok in eog:
                stop = "eog"
                break
            tokens.append(tok)
            llm.eval([tok])
        return tokens, stop, steps

    cases = []
    for name, category, text in PLAIN:
        add_special, parse_special = True, False
        ids = llm.tokenize(text.encode(), add_bos=add_special, special=parse_special)
        cases.append({"name": name, "category": category, "prompt": text, "chat": False,
                      "add_special": add_special, "parse_special": parse_special, "prompt_tokens": ids})
    for name, messages in CHAT:
        text = render_chatml(messages)
        peer_text = render_with_llama_cpp(template, messages)
        if text != peer_text:
            sys.exit(f"gen-fixtures: error: ChatML rendering differs from llama.cpp for {name}:\n"
                     f"{text!r}\n{peer_text!r}")
        add_special, parse_special = True, True
        ids = llm.tokenize(text.encode(), add_bos=add_special, special=parse_special)
        cases.append({"name": name, "category": "chat", "prompt": text, "chat": True,
                      "messages": [{"role": r, "content": c} for r, c in messages],
                      "add_special": add_special, "parse_special": parse_special, "prompt_tokens": ids})

    tokenizer_cases = [{"text": t, "ids": llm.tokenize(t.encode(), add_bos=False, special=False)}
                       for t in TOKENIZER]

    for i, case in enumerate(cases):
        tokens, stop, steps = decode_case(case["prompt_tokens"])
        case.update({"tokens": tokens, "text": llm.detokenize(tokens).decode("utf-8", "replace"),
                     "stop_reason": stop, "first_top": steps[0]["top"], "steps": steps})
        print(f"[{i + 1:2}/{len(cases)}] {case['name']:<22} {len(case['prompt_tokens']):4} prompt tokens, "
              f"{len(tokens):2} generated ({stop}), min gap {min(s['gap'] for s in steps):.4f}",
              file=sys.stderr)

    header = {
        "description": "llama.cpp reference for tokenizer and greedy-decoding parity "
                       "(scripts/peer/gen-fixtures.py)",
        "format": "prompt = exact text tokenized with add_special/parse_special (llama.cpp semantics); "
                  "tokens = greedy continuation without the stop token; steps[i] = position i of the "
                  "continuation: chosen id, its logprob, top-10 [id, logprob], gap = top1 - top2 "
                  "logprob (natural log); the last step is the EOG token when stop_reason == 'eog'; "
                  "first_top = steps[0].top. Chat prompts: llama.cpp's built-in ChatML rendering "
                  "(no default system prompt), verified against llama_chat_apply_template.",
        "peer": peer_info(),
        "model": {"file": os.path.basename(model), "sha256": sha256_file(model)},
        "settings": {"n_ctx": N_CTX, "n_batch": N_BATCH, "n_ubatch": N_BATCH, "n_threads": N_THREADS,
                     "flash_attn": True, "kv_type": "f16", "greedy_steps": args.steps, "top_k": TOP_K},
        "eog_ids": eog,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "n_cases": len(cases),
        "tokenizer_format": "tokenizer_cases: text tokenized with add_special = parse_special = false",
    }
    write_json(args.out, header, cases, tokenizer_cases)
    print(f"gen-fixtures: wrote {len(cases)} cases to {args.out} ({os.path.getsize(args.out)} bytes)",
          file=sys.stderr)


def write_json(path, header, cases, tokenizer_cases):
    """Compact but diffable: one line per step, scalars of a case on their own lines."""
    d = lambda v: json.dumps(v, ensure_ascii=False)
    lines = ["{", f' "header": {json.dumps(header, ensure_ascii=False, indent=2)},']
    if tokenizer_cases:
        lines.append(' "tokenizer_cases": [')
        lines.append(",\n".join(f"  {d(t)}" for t in tokenizer_cases))
        lines.append(' ],')
    lines.append(' "cases": [')
    for ci, case in enumerate(cases):
        fields = [f'  "{k}": {d(v)}' for k, v in case.items() if k != "steps"]
        steps = ",\n".join(f"   {d(s)}" for s in case["steps"])
        fields.append(f'  "steps": [\n{steps}\n  ]')
        lines.append("  {\n" + ",\n".join(fields) + "\n  }" + ("," if ci + 1 < len(cases) else ""))
    lines += [" ]", "}"]
    tmp = path + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    json.load(open(tmp, encoding="utf-8"))  # sanity: valid JSON
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
