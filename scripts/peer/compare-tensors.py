#!/usr/bin/env python3
"""Bitwise comparison of our per-op tensors (ours-dump-tensors) with llama.cpp's (dump-tensors.py).

Usage: compare-tensors.py PEER.npz OURS_DIR [LAYERS]   (LAYERS: comma list, default all)
Prints, per layer and op, the number of elements whose bits differ and the max relative error.
"""
import os
import sys

import numpy as np

OPS = ['attn_norm', 'Vcur', 'Kcur', 'Qcur', 'kqv_out', 'attn_out', 'ffn_inp', 'ffn_norm',
       'ffn_gate', 'ffn_up', 'ffn_swiglu', 'ffn_out', 'l_out']


def cmp(ref, ours):
    if ours.size != ref.size:
        return 'size %d/%d' % (ours.size, ref.size)
    ne = int((ours.view(np.uint32) != ref.view(np.uint32)).sum())
    rel = np.abs(ours - ref).max() / (np.abs(ref).max() + 1e-30)
    return '%d/%.0e' % (ne, rel)


def main():
    peer = np.load(sys.argv[1])
    od = sys.argv[2]
    n_layer = 1 + max(int(k.rsplit('-', 1)[1]) for k in peer.keys() if k.startswith('l_out-'))
    layers = [int(x) for x in sys.argv[3].split(',')] if len(sys.argv) > 3 else range(n_layer)
    for l in layers:
        line = 'L%2d' % l
        for op in OPS:
            key = '%s-%d' % (op, l)
            f = os.path.join(od, key + '.bin')
            if key in peer and os.path.exists(f):
                line += ' %s:%s' % (op, cmp(peer[key].astype(np.float32).ravel(),
                                            np.fromfile(f, dtype=np.float32)))
        print(line)
    for key in ('result_norm', 'result_output'):
        f = os.path.join(od, key + '.bin')
        if key in peer and os.path.exists(f):
            print(key, cmp(peer[key].astype(np.float32).ravel(), np.fromfile(f, dtype=np.float32)))


if __name__ == '__main__':
    main()
