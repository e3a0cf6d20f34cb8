#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_gguf (tests/fuzz/corpus/gguf): small valid GGUF files and the
classic broken ones (truncations, bad magic, future version, oversized counts, misaligned and
overlapping tensor offsets). Run once by hand; the files are committed and replayed by ctest.
    python3 tests/fuzz/make-gguf-seeds.py tests/fuzz/corpus/gguf
"""
import os
import struct
import sys

T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64 = 4, 5, 6, 7, 8, 9, 10


def s(text):
    b = text.encode()
    return struct.pack('<Q', len(b)) + b


def kv(key, vtype, payload):
    return s(key) + struct.pack('<I', vtype) + payload


def gguf(kvs, tensors, version=3, align=32, magic=b'GGUF', n_kv=None, n_t=None):
    head = magic + struct.pack('<IQQ', version, len(tensors) if n_t is None else n_t,
                               len(kvs) if n_kv is None else n_kv)
    body = b''.join(kvs)
    infos, data, off = b'', b'', 0
    for name, dims, ttype, raw in tensors:
        infos += s(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
        infos += struct.pack('<IQ', ttype, off)
        data += raw + b'\0' * ((-len(raw)) % align)
        off = len(data)
    meta = head + body + infos
    meta += b'\0' * ((-len(meta)) % align)
    return meta + data


def main(out):
    os.makedirs(out, exist_ok=True)
    kvs = [
        kv('general.architecture', T_STR, s('llama')),
        kv('general.alignment', T_U32, struct.pack('<I', 32)),
        kv('llama.context_length', T_U32, struct.pack('<I', 128)),
        kv('tokenizer.ggml.tokens', T_ARR, struct.pack('<IQ', T_STR, 3) + s('a') + s('b') + s('<s>')),
        kv('tokenizer.ggml.scores', T_ARR, struct.pack('<IQ', T_F32, 3) + struct.pack('<3f', 0, -1, -2)),
        kv('general.flag', T_BOOL, b'\1'),
        kv('general.count', T_U64, struct.pack('<Q', 7)),
    ]
    f32 = struct.pack('<8f', *range(8))
    q8_0 = struct.pack('<e', 0.5) + bytes(range(32))  # one Q8_0 block (type 8)
    tensors = [('w.f32', [8], 0, f32), ('w.q8', [32], 8, q8_0)]
    seeds = {
        'valid-empty.gguf': gguf([], []),
        'valid-kv.gguf': gguf(kvs, []),
        'valid-tensors.gguf': gguf(kvs, tensors),
        'v2.gguf': gguf(kvs[:3], tensors[:1], version=2),
        'bad-magic.gguf': gguf(kvs, tensors, magic=b'GGUX'),
        'future-version.gguf': gguf(kvs, tensors, version=99),
        'huge-kv-count.gguf': gguf(kvs, [], n_kv=1 << 60),
        'huge-tensor-count.gguf': gguf([], tensors, n_t=1 << 40),
        'string-past-end.gguf': gguf([kv('k', T_STR, struct.pack('<Q', 1 << 40) + b'x')], []),
        'array-past-end.gguf': gguf([kv('k', T_ARR, struct.pack('<IQ', T_U32, 1 << 50))], []),
        'bad-type.gguf': gguf([kv('k', 77, b'\0' * 8)], []),
        'tensor-bad-dims.gguf': gguf([], [('t', [0, 1 << 62], 0, b'')]),
    }
    full = seeds['valid-tensors.gguf']
    for cut in (3, 4, 23, 40, len(full) // 2, len(full) - 1):
        seeds[f'truncated-{cut}.gguf'] = full[:cut]
    # A tensor whose offset runs past the end of the file.
    bad = bytearray(full)
    pos = bad.find(b'w.q8') + 4 + 4 + 8 + 4
    struct.pack_into('<Q', bad, pos, 1 << 20)
    seeds['tensor-offset-past-end.gguf'] = bytes(bad)
    for name, data in seeds.items():
        with open(os.path.join(out, name), 'wb') as fh:
            fh.write(data)
    print(f'{len(seeds)} seeds in {out}')


if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else 'tests/fuzz/corpus/gguf')
