#!/usr/bin/env python3
"""Converts a sentence-transformers BERT model directory (model.safetensors, config.json,
vocab.txt, tokenizer_config.json / tokenizer.json, sentence_bert_config.json, 1_Pooling/config.json)
into the GGUF file retrieval/embedder-bert.cpp loads. Pure Python + numpy: safetensors and GGUF
are both simple formats, so neither torch nor the gguf package is needed.

    python3 scripts/convert-embedder.py MODEL_DIR OUT.gguf [--dtype f16|f32] [--name NAME]

Tensor names follow llama.cpp's BERT layout (token_embd, position_embd, token_types, blk.N.*);
the tokenizer and pooling settings go in bert.* / tokenizer.* / cacheblend.embedder.* keys.
2-D weight matrices are stored in --dtype (default f16); embeddings tables the same; norms and
biases always f32.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

GGUF_MAGIC = 0x46554747  # "GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32
T_U32, T_I32, T_F32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_F16 = 0, 1


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        dtypes = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            f.seek(base + begin)
            raw = f.read(end - begin)
            if info["dtype"] == "BF16":
                u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
                arr = u.view(np.float32)
            else:
                arr = np.frombuffer(raw, dtype=dtypes[info["dtype"]])
            out[name] = arr.reshape(info["shape"])
    return out


class GGUFWriter:
    def __init__(self):
        self.kv = []
        self.tensors = []

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def add_u32(self, k, v):
        self.kv.append((k, struct.pack("<I", T_U32) + struct.pack("<I", v)))

    def add_f32(self, k, v):
        self.kv.append((k, struct.pack("<I", T_F32) + struct.pack("<f", v)))

    def add_bool(self, k, v):
        self.kv.append((k, struct.pack("<I", T_BOOL) + struct.pack("<B", 1 if v else 0)))

    def add_str(self, k, v):
        self.kv.append((k, struct.pack("<I", T_STRING) + self._str(v)))

    def add_str_array(self, k, vs):
        payload = struct.pack("<IIQ", T_ARRAY, T_STRING, len(vs))
        payload += b"".join(self._str(v) for v in vs)
        self.kv.append((k, payload))

    def add_i32_array(self, k, vs):
        payload = struct.pack("<IIQ", T_ARRAY, T_I32, len(vs))
        payload += np.asarray(vs, dtype="<i4").tobytes()
        self.kv.append((k, payload))

    def add_tensor(self, name, arr, ggml_type):
        arr = np.ascontiguousarray(arr, dtype=np.float16 if ggml_type == GGML_F16 else np.float32)
        self.tensors.append((name, arr, ggml_type))

    def write(self, path):
        def pad(n):
            return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT

        head = struct.pack("<IIQQ", GGUF_MAGIC, GGUF_VERSION, len(self.tensors), len(self.kv))
        head += b"".join(self._str(k) + v for k, v in self.kv)
        offset = 0
        for name, arr, t in self.tensors:
            dims = list(reversed(arr.shape))  # ggml order: ne[0] is the row length
            head += self._str(name) + struct.pack("<I", len(dims))
            head += b"".join(struct.pack("<Q", d) for d in dims)
            head += struct.pack("<IQ", t, offset)
            offset += arr.nbytes + pad(arr.nbytes)
        head += b"\0" * pad(len(head))
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(head)
            for _, arr, _ in self.tensors:
                f.write(arr.tobytes())
                f.write(b"\0" * pad(arr.nbytes))
        os.replace(tmp, path)


def load_json(path, default=None):
    if not os.path.exists(path):
        if default is None:
            sys.exit(f"convert-embedder: missing {path}")
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=["f16", "f32"], default="f16")
    ap.add_argument("--name", default=None, help="general.name (default: the directory name)")
    args = ap.parse_args()
    d = args.model_dir
    wtype = GGML_F16 if args.dtype == "f16" else GGML_F32

    cfg = load_json(os.path.join(d, "config.json"))
    if cfg.get("model_type") != "bert" or cfg.get("hidden_act", "gelu") != "gelu":
        sys.exit("convert-embedder: only BERT models with (erf) gelu are supported")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        sys.exit("convert-embedder: only absolute position embeddings are supported")
    tok_cfg = load_json(os.path.join(d, "tokenizer_config.json"), {})
    st_cfg = load_json(os.path.join(d, "sentence_bert_config.json"), {})
    pool = load_json(os.path.join(d, "1_Pooling", "config.json"),
                     {"pooling_mode_mean_tokens": True})
    modules = load_json(os.path.join(d, "modules.json"), [])
    tok_json = load_json(os.path.join(d, "tokenizer.json"), {})

    if not pool.get("pooling_mode_mean_tokens") or any(
            pool.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                  "pooling_mode_mean_sqrt_len_tokens")):
        sys.exit("convert-embedder: only mean pooling is supported")
    normalize = any(m.get("type", "").endswith("Normalize") for m in modules)

    # Tokenizer settings: tokenizer.json (the fast tokenizer sentence-transformers uses) first.
    norm = tok_json.get("normalizer") or {}
    lower = norm.get("lowercase", tok_cfg.get("do_lower_case", True))
    strip = norm.get("strip_accents", tok_cfg.get("strip_accents"))
    if strip is None:
        strip = lower  # BERT: accents are stripped iff lower-casing unless set explicitly
    chinese = norm.get("handle_chinese_chars", tok_cfg.get("tokenize_chinese_chars", True))
    clean = norm.get("clean_text", True)
    wp = tok_json.get("model") or {}
    max_chars = wp.get("max_input_chars_per_word", 100)
    prefix = wp.get("continuing_subword_prefix", "##")

    with open(os.path.join(d, "vocab.txt"), encoding="utf-8") as f:
        vocab = [line.rstrip("\n") for line in f]
    if vocab and vocab[-1] == "":
        vocab.pop()
    index = {t: i for i, t in enumerate(vocab)}

    def tid(tok):
        if tok not in index:
            sys.exit(f"convert-embedder: {tok} not in vocab.txt")
        return index[tok]

    specials = [t["content"] for t in tok_json.get("added_tokens", []) if t.get("special")]
    if not specials:
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

    w = read_safetensors(os.path.join(d, "model.safetensors"))
    # Some exports prefix the BertModel weights with "bert." (BertForX) or "0.auto_model.".
    for p in ("bert.", "0.auto_model.", "auto_model."):
        if any(k.startswith(p) for k in w):
            w = {k[len(p):]: v for k, v in w.items() if k.startswith(p)}

    n_layer = cfg["num_hidden_layers"]
    hidden = cfg["hidden_size"]
    g = GGUFWriter()
    g.add_str("general.architecture", "bert")
    g.add_str("general.name", args.name or os.path.basename(os.path.normpath(d)))
    g.add_str("general.license", "apache-2.0")
    g.add_u32("bert.context_length", cfg["max_position_embeddings"])
    g.add_u32("bert.embedding_length", hidden)
    g.add_u32("bert.feed_forward_length", cfg["intermediate_size"])
    g.add_u32("bert.block_count", n_layer)
    g.add_u32("bert.attention.head_count", cfg["num_attention_heads"])
    g.add_f32("bert.attention.layer_norm_epsilon", cfg.get("layer_norm_eps", 1e-12))
    g.add_bool("bert.attention.causal", False)
    g.add_u32("bert.pooling_type", 1)  # llama.cpp's LLAMA_POOLING_TYPE_MEAN
    g.add_str("cacheblend.embedder.pooling", "mean")
    g.add_bool("cacheblend.embedder.normalize", normalize)
    g.add_u32("cacheblend.embedder.max_seq_length",
              st_cfg.get("max_seq_length", cfg["max_position_embeddings"]))
    g.add_str("tokenizer.ggml.model", "bert")
    g.add_str_array("tokenizer.ggml.tokens", vocab)
    g.add_u32("tokenizer.ggml.unknown_token_id", tid(wp.get("unk_token", "[UNK]")))
    g.add_u32("tokenizer.ggml.cls_token_id", tid("[CLS]"))
    g.add_u32("tokenizer.ggml.seperator_token_id", tid("[SEP]"))  # llama.cpp's spelling
    g.add_u32("tokenizer.ggml.padding_token_id", tid("[PAD]"))
    g.add_str_array("tokenizer.wordpiece.special_tokens", specials)
    g.add_bool("tokenizer.wordpiece.do_lower_case", bool(lower))
    g.add_bool("tokenizer.wordpiece.strip_accents", bool(strip))
    g.add_bool("tokenizer.wordpiece.tokenize_chinese_chars", bool(chinese))
    g.add_bool("tokenizer.wordpiece.clean_text", bool(clean))
    g.add_u32("tokenizer.wordpiece.max_input_chars_per_word", max_chars)
    g.add_str("tokenizer.wordpiece.subword_prefix", prefix)

    def t(name, src, mat=False):
        if src not in w:
            sys.exit(f"convert-embedder: tensor {src} missing")
        g.add_tensor(name, w[src].astype(np.float32), wtype if mat else GGML_F32)

    e = "embeddings."
    t("token_embd.weight", e + "word_embeddings.weight", True)
    t("position_embd.weight", e + "position_embeddings.weight", True)
    t("token_types.weight", e + "token_type_embeddings.weight")
    t("token_embd_norm.weight", e + "LayerNorm.weight")
    t("token_embd_norm.bias", e + "LayerNorm.bias")
    for i in range(n_layer):
        s = f"encoder.layer.{i}."
        b = f"blk.{i}."
        for ours, theirs in (("attn_q", "attention.self.query"), ("attn_k", "attention.self.key"),
                             ("attn_v", "attention.self.value"),
                             ("attn_output", "attention.output.dense"),
                             ("ffn_up", "intermediate.dense"), ("ffn_down", "output.dense")):
            t(b + ours + ".weight", s + theirs + ".weight", True)
            t(b + ours + ".bias", s + theirs + ".bias")
        for ours, theirs in (("attn_output_norm", "attention.output.LayerNorm"),
                             ("layer_output_norm", "output.LayerNorm")):
            t(b + ours + ".weight", s + theirs + ".weight")
            t(b + ours + ".bias", s + theirs + ".bias")
    g.write(args.out)
    print(f"convert-embedder: wrote {args.out} ({len(g.tensors)} tensors, {args.dtype})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
