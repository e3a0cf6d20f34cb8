#!/usr/bin/env python3
"""Dumps every named f32 tensor of one llama.cpp prompt evaluation (via cb_eval) to an .npz.

Usage: dump-tensors.py MODEL.gguf PARITY.json CASE OUT.npz [--fa 0|1] [--threads N]

Runs the prompt tokens of case CASE of the parity fixture (tests/data/llama-cpp-parity.json) in
one batch with llama-cpp-python (the peer build of setup-llama-cpp.sh). Names are llama.cpp's
graph names: attn_norm-L, Qcur-L, Kcur-L, Vcur-L, kqv_out-L, attn_out-L, ffn_inp-L, ffn_norm-L,
ffn_gate-L, ffn_up-L, ffn_swiglu-L, ffn_out-L, l_out-L, result_norm, result_output; a name computed
twice (Qcur before and after RoPE) keeps its last value. Compare with compare-tensors.py.
"""
import argparse
import ctypes
import json

import numpy as np
import llama_cpp


class GgmlTensor(ctypes.Structure):
    # Leading fields of struct ggml_tensor (ggml.h of the vendored llama.cpp).
    _fields_ = [('type', ctypes.c_int), ('buffer', ctypes.c_void_p), ('ne', ctypes.c_int64 * 4),
                ('nb', ctypes.c_size_t * 4), ('op', ctypes.c_int),
                ('op_params', ctypes.c_int32 * 16), ('flags', ctypes.c_int32),
                ('src', ctypes.c_void_p * 10), ('view_src', ctypes.c_void_p),
                ('view_offs', ctypes.c_size_t), ('data', ctypes.c_void_p),
                ('name', ctypes.c_char * 64), ('extra', ctypes.c_void_p),
                ('padding', ctypes.c_char * 8)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('model')
    ap.add_argument('fixture')
    ap.add_argument('case', type=int)
    ap.add_argument('out')
    ap.add_argument('--fa', type=int, default=1, help='flash attention (the fixture uses 1)')
    ap.add_argument('--threads', type=int, default=1)
    args = ap.parse_args()

    toks = json.load(open(args.fixture))['cases'][args.case]['prompt_tokens']
    out = {}
    cb_type = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_bool, ctypes.c_void_p)

    def cb(tp, ask, _ud):
        if ask:
            return True
        t = GgmlTensor.from_address(tp)
        if t.type != 0 or t.nb[0] != 4:  # f32, contiguous rows only
            return True
        ne, nb = list(t.ne), list(t.nb)
        arr = np.zeros((ne[3], ne[2], ne[1], ne[0]), dtype=np.float32)
        for i3 in range(ne[3]):
            for i2 in range(ne[2]):
                for i1 in range(ne[1]):
                    off = t.data + i1 * nb[1] + i2 * nb[2] + i3 * nb[3]
                    arr[i3, i2, i1, :] = np.ctypeslib.as_array(
                        (ctypes.c_float * ne[0]).from_address(off))
        out[t.name.decode()] = arr
        return True

    cbf = cb_type(cb)
    llama_cpp.llama_backend_init()
    model = llama_cpp.llama_model_load_from_file(args.model.encode(),
                                                 llama_cpp.llama_model_default_params())
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 512
    cp.n_threads = cp.n_threads_batch = args.threads
    cp.flash_attn_type = 1 if args.fa else 0
    cp.cb_eval = cbf
    cp.cb_eval_user_data = None
    ctx = llama_cpp.llama_init_from_model(model, cp)
    tarr = (llama_cpp.llama_token * len(toks))(*toks)
    assert llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(tarr, len(toks))) == 0
    np.savez(args.out, **out)
    print('%d tensors -> %s' % (len(out), args.out))


if __name__ == '__main__':
    main()
