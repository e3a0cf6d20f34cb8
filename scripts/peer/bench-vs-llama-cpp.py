#!/usr/bin/env python3
"""Prefill and decode speed of our engine against llama.cpp, same GGUF, same thread count, one run.

    python3 scripts/peer/bench-vs-llama-cpp.py [--threads 2] [--runs 3] [--json] [--check]
    python3 scripts/peer/bench-vs-llama-cpp.py --peer-only     # llama.cpp half only

Ours:      build/bin/cacheblend bench prefill --tokens 512,2048 and bench decode --tokens 128 (--json).
llama.cpp: llama-cpp-python from scripts/peer/setup-llama-cpp.sh (runs under its venv's python; this
           script re-executes itself there), flash attention on, n_batch 2048, n_ubatch 512,
           n_threads = n_threads_batch = --threads. Prefill: random non-special token ids, a fresh
           context per run; decode: greedy tokens after a 16-token prompt. One warm-up run, then the
           median of --runs runs. Ours runs first, so llama.cpp's OpenMP threads cannot disturb it.
Targets: prefill >= 1.3x llama.cpp on K-quant models (Qwen) and >= 2.5x on
SmolLM2's Q4_1, decode >= 1.2x; --target-prefill / --target-decode override them. --check exits 1
when one is missed.
The CPU time other processes take during each half is measured and reported: on a busy machine
(a share above 5%) the numbers are flagged as not trustworthy.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PREFILL_SIZES = (512, 2048)
DECODE_PROMPT, DECODE_TOKENS = 16, 128
TARGETS = {"prefill": 1.3, "decode": 1.2}
# Models where llama.cpp has no fast path (Q4_1): the bar is higher.
PREFILL_TARGET_BY_NAME = {"SmolLM2": 2.5}


def _reexec_in_peer_venv():
    venv = os.environ.get("CBL_PEER_VENV") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "cacheblend", "peer-venv")
    py = os.path.join(venv, "bin", "python")
    if os.path.exists(py) and os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(py, [py] + sys.argv)
    sys.exit("bench-vs-llama-cpp: error: llama_cpp not importable; run scripts/peer/setup-llama-cpp.sh "
             "(or set CBL_PEER_VENV)")


try:
    import numpy as np
    import llama_cpp
except ImportError:
    _reexec_in_peer_venv()


def log(msg):
    print(f"bench-vs-llama-cpp: {msg}", file=sys.stderr, flush=True)


def default_model(name=None):
    # A model name (e.g. qwen2.5-coder-0.5b), else $CBL_MODEL (a path or a name), else the default
    # model: fetch-model.sh turns each into a file path, which is what llama.cpp opens.
    return subprocess.run(["bash", os.path.join(REPO, "scripts", "fetch-model.sh")] + ([name] if name else []),
                          check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


def peer_info():
    info = {"llama_cpp_python": llama_cpp.__version__,
            "system_info": llama_cpp.llama_print_system_info().decode().strip()}
    try:
        ggml = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
        for fn in ("ggml_version", "ggml_commit"):
            f = getattr(ggml, fn)
            f.restype = ctypes.c_char_p
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


class Peer:
    """llama.cpp through llama-cpp-python's low-level API (no Python per-token overhead beyond ctypes)."""

    def __init__(self, model_path, threads):
        self.threads = threads
        mparams = llama_cpp.llama_model_default_params()
        self.model = llama_cpp.llama_model_load_from_file(model_path.encode(), mparams)
        if not self.model:
            raise RuntimeError(f"llama.cpp cannot load {model_path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.normal_ids = np.array([t for t in range(self.n_vocab)
                                    if not llama_cpp.llama_vocab_is_control(self.vocab, t)
                                    and not llama_cpp.llama_vocab_is_eog(self.vocab, t)], dtype=np.int32)
        self.rng = np.random.default_rng(1234)

    def _context(self, n_ctx):
        p = llama_cpp.llama_context_default_params()
        p.n_ctx = (n_ctx + 255) // 256 * 256
        p.n_batch, p.n_ubatch = 2048, 512
        p.n_threads = p.n_threads_batch = self.threads
        p.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        p.no_perf = True
        ctx = llama_cpp.llama_init_from_model(self.model, p)
        if not ctx:
            raise RuntimeError("llama.cpp cannot create a context")
        return ctx

    def _decode(self, ctx, ids):
        arr = (llama_cpp.llama_token * len(ids))(*[int(t) for t in ids])
        rc = llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(arr, len(ids)))
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def prefill(self, n):
        """Seconds to prefill n random non-special tokens in a fresh context."""
        ids = self.rng.choice(self.normal_ids, size=n)
        ctx = self._context(n)
        try:
            t0 = time.perf_counter()
            self._decode(ctx, ids)
            llama_cpp.llama_synchronize(ctx)
            return time.perf_counter() - t0
        finally:
            llama_cpp.llama_free(ctx)

    def decode(self, n_prompt, n_gen):
        """Seconds to generate n_gen greedy tokens after an (untimed) n_prompt-token prompt."""
        ids = self.rng.choice(self.normal_ids, size=n_prompt)
        ctx = self._context(n_prompt + n_gen)
        try:
            self._decode(ctx, ids)
            t0 = time.perf_counter()
            for _ in range(n_gen):
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(self.n_vocab,))
                self._decode(ctx, [int(np.argmax(logits))])
            llama_cpp.llama_synchronize(ctx)
            return time.perf_counter() - t0
        finally:
            llama_cpp.llama_free(ctx)


class ForeignLoad:
    """Share of the machine's CPU time used by other processes while a block runs: a busy machine
    makes any timing here meaningless (2 cores, OpenMP and spin-waiting pools)."""

    def __enter__(self):
        self.t0, self.busy0, self.own0 = time.perf_counter(), self._busy(), self._own()
        return self

    def __exit__(self, *exc):
        wall = time.perf_counter() - self.t0
        other = (self._busy() - self.busy0) - (self._own() - self.own0)
        self.share = max(0.0, other) / max(wall * (os.cpu_count() or 1), 1e-9)

    @staticmethod
    def _busy():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait

    @staticmethod
    def _own():
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system


def median_rate(fn, tokens, runs):
    fn()  # warm-up
    return tokens / statistics.median(fn() for _ in range(runs))


def run_peer(model, threads, runs):
    global _quiet  # the C side keeps the callback pointer: keep the Python object alive
    _quiet = llama_cpp.llama_log_callback(lambda level, text, user_data: None)
    llama_cpp.llama_log_set(_quiet, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()
    peer = Peer(model, threads)
    out = {}
    for n in PREFILL_SIZES:
        out[("prefill", n)] = median_rate(lambda: peer.prefill(n), n, runs)
        log(f"llama.cpp prefill {n}: {out[('prefill', n)]:.1f} tokens/s")
    out[("decode", DECODE_TOKENS)] = median_rate(lambda: peer.decode(DECODE_PROMPT, DECODE_TOKENS),
                                                 DECODE_TOKENS, runs)
    log(f"llama.cpp decode {DECODE_TOKENS}: {out[('decode', DECODE_TOKENS)]:.1f} tokens/s")
    llama_cpp.llama_model_free(peer.model)
    return out


def run_ours(cli, model, threads):
    out = {}
    for kind, sizes in (("prefill", PREFILL_SIZES), ("decode", (DECODE_TOKENS,))):
        cmd = [cli, "bench", kind, "--model", model, "--tokens", ",".join(map(str, sizes)),
               "--threads", str(threads), "--json"]
        log("running " + " ".join(cmd))
        res = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
        for row in json.loads(res.stdout):
            out[(row["kind"], int(row["tokens"]))] = float(row["tokens_per_s"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="GGUF (default: $CBL_MODEL, else qwen2.5-coder-1.5b, via scripts/fetch-model.sh)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3, help="timed runs per test (median), after a warm-up")
    ap.add_argument("--cli", default=os.path.join(REPO, "build", "bin", "cacheblend"))
    ap.add_argument("--peer-only", action="store_true", help="measure llama.cpp only")
    ap.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--target-prefill", type=float, default=None, help="prefill ratio target")
    ap.add_argument("--target-decode", type=float, default=None, help="decode ratio target")
    args = ap.parse_args()
    model = args.model if args.model and os.path.isfile(args.model) else default_model(args.model)

    ours, load = {}, {}
    if not args.peer_only:
        if not os.access(args.cli, os.X_OK):
            sys.exit(f"bench-vs-llama-cpp: error: {args.cli} not built (scripts/build.sh), or use --peer-only")
        with ForeignLoad() as fl:
            ours = run_ours(args.cli, model, args.threads)
        load["ours"] = fl.share
    with ForeignLoad() as fl:
        peer = run_peer(model, args.threads, args.runs)
    load["llama_cpp"] = fl.share
    busy = {k: v for k, v in load.items() if v > 0.05}
    if busy:
        log("WARNING: other processes used " + ", ".join(f"{v:.0%} of the CPU during the {k} half"
            for k, v in busy.items()) + "; these numbers are not trustworthy")

    targets = dict(TARGETS)
    for name, t in PREFILL_TARGET_BY_NAME.items():
        if name in os.path.basename(model):
            targets["prefill"] = t
    if args.target_prefill is not None:
        targets["prefill"] = args.target_prefill
    if args.target_decode is not None:
        targets["decode"] = args.target_decode
    rows = []
    for (kind, n), peer_rate in peer.items():
        our_rate = ours.get((kind, n))
        ratio = our_rate / peer_rate if our_rate else None
        rows.append({"test": f"pp{n}" if kind == "prefill" else f"tg{n}", "kind": kind, "tokens": n,
                     "threads": args.threads, "llama_cpp_tokens_per_s": round(peer_rate, 2),
                     "ours_tokens_per_s": round(our_rate, 2) if our_rate else None,
                     "ratio": round(ratio, 3) if ratio else None, "target": targets[kind],
                     "pass": (ratio >= targets[kind]) if ratio else None})
    info = peer_info()
    report = {"model": {"file": os.path.basename(model)}, "threads": args.threads, "runs": args.runs,
              "foreign_cpu_share": {k: round(v, 3) for k, v in load.items()},
              "peer": dict(info, flash_attn=True, n_batch=2048, n_ubatch=512), "results": rows}

    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"model     {os.path.basename(model)}, {args.threads} threads, median of {args.runs} runs")
        print(f"llama.cpp llama-cpp-python {info['llama_cpp_python']}, ggml {info.get('ggml_version', '?')} "
              f"({info.get('ggml_commit', '?')}), {info.get('build_cmake_args', 'build flags unknown')}, "
              "flash attention on, n_batch 2048, n_ubatch 512")
        print(f"\n{'test':<8}{'llama.cpp t/s':>15}{'ours t/s':>12}{'ratio':>9}{'target':>9}  result")
        for r in rows:
            ours_s = f"{r['ours_tokens_per_s']:.1f}" if r["ours_tokens_per_s"] else "-"
            ratio_s = f"{r['ratio']:.2f}x" if r["ratio"] else "-"
            res = "-" if r["pass"] is None else ("PASS" if r["pass"] else "MISS")
            print(f"{r['test']:<8}{r['llama_cpp_tokens_per_s']:>15.1f}{ours_s:>12}{ratio_s:>9}"
                  f"{'>= %.1fx' % r['target']:>9}  {res}")
        print("(tg: greedy tokens after a 16-token prompt)")
        print("other processes' CPU share: " + ", ".join(f"{k} half {v:.0%}" for k, v in load.items())
              + ("  <- BUSY MACHINE, numbers not trustworthy" if busy else ""))
    if args.check and any(r["pass"] is False for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
