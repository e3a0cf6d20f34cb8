// RoPE for the CUDA kernels, the CPU's float math (kernels/cpu/ops.cpp, ggml's rope_f32):
// theta_i = pos * theta_scale^i built by i successive float multiplies (not powf per pair, which
// rounds differently), t = freq_scale * (theta_i / freq_factor_i), then cos/sin of t and the
// rotation as FMAs. theta_scale = base^(-2/n_dims) is computed once on the host with the C
// library's powf (rope_make_consts), so host and device start from the same float.
//
// The kernels give one thread one pair: rope_pair (queries/keys in f32, in place) and
// relocate_pair (cached f32 K rotated to a new position and rounded to f16, V copied). On the
// host the same functions looped over every pair give the CPU's results bit for bit; on a GPU
// cosf / sinf may differ from the C library's by an ulp or two.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/fp16.h"
#include "kernels/hd.h"

namespace cacheblend {
namespace hd {

struct rope_consts {
    int n_rot;          // rotated pairs per head (n_dims / 2); 0 when the parameters are unusable
    bool neox;          // NeoX half-split (qwen2) instead of adjacent pairs (GGUF `llama`)
    int n_dims;
    float theta_scale;  // freq_base^(-2 / n_dims), from the host's powf
    float freq_scale;
    const float* freq_factors;  // n_dims / 2 divisors or nullptr (device memory in kernels)
};

// Host only. Parameters the CPU's rope() ignores (n_dims odd, <= 0 or > head_dim) rotate nothing.
inline rope_consts rope_make_consts(bool neox, int n_dims, float freq_base, float freq_scale,
                                    const float* freq_factors, int head_dim) {
    rope_consts c{};
    const bool usable = n_dims > 0 && n_dims <= head_dim && n_dims % 2 == 0;
    c.n_rot = usable ? n_dims / 2 : 0;
    c.neox = neox;
    c.n_dims = n_dims;
    c.theta_scale = usable ? std::pow(freq_base, -2.0f / static_cast<float>(n_dims)) : 1.f;
    c.freq_scale = freq_scale;
    c.freq_factors = freq_factors;
    return c;
}

// Angle of pair i at position pos.
CBL_HD inline float rope_angle(const rope_consts& k, int32_t pos, int i) {
    float theta = static_cast<float>(pos);
    for (int j = 0; j < i; ++j) theta = mul_rn(theta, k.theta_scale);
    const float ff = k.freq_factors ? k.freq_factors[i] : 1.0f;
    return mul_rn(k.freq_scale, theta / ff);
}

// Dims of pair i: adjacent (2i, 2i+1) for NORM, halves (i, i + n_dims/2) for NeoX.
CBL_HD inline void rope_pair_dims(const rope_consts& k, int i, int* d0, int* d1) {
    if (k.neox) {
        *d0 = i;
        *d1 = i + k.n_dims / 2;
    } else {
        *d0 = 2 * i;
        *d1 = 2 * i + 1;
    }
}

// (x0, x1) rotated by the angle with cosine c and sine s, the CPU's FMA shape
// (x0*c - x1*s, x0*s + x1*c with the outer operation fused).
CBL_HD inline void rope_rotate(float* x0, float* x1, float c, float s) {
    const float a = *x0, b = *x1;
    *x0 = fma_rn(a, c, -mul_rn(b, s));
    *x1 = fma_rn(a, s, mul_rn(b, c));
}

// Rotates pair i (< k.n_rot) of one head vector v in place at position pos.
CBL_HD inline void rope_pair(float* v, const rope_consts& k, int32_t pos, int i) {
    const float t = rope_angle(k, pos, i);
    int d0, d1;
    rope_pair_dims(k, i, &d0, &d1);
    rope_rotate(&v[d0], &v[d1], cos_f(t), sin_f(t));
}

// A stored key element in f32: keys arrive in f32 (exact format) or as f16 bits (f16 format),
// whose widening is exact, so both give the rotation the same input.
CBL_HD inline float key_f32(const float* ks, int i) { return ks[i]; }
CBL_HD inline float key_f32(const uint16_t* ks, int i) { return h2f(ks[i]); }

// Pair p in [0, ceil(head_dim / 2)) of one cached head: pairs p < n_rot rotate K to pos (in f32,
// rounded to f16, as the CPU); the others carry K dims 2p, 2p+1, which lie at or past n_dims in
// both styles, unrotated into f16. V dims 2p, 2p+1 are copied in every case. Key: float or
// uint16_t (f16 bits).
template <typename Key>
CBL_HD inline void relocate_pair(const Key* ks, const uint16_t* vs, uint16_t* kd, uint16_t* vd,
                                 int head_dim, const rope_consts& k, int32_t pos, int p) {
    const int e0 = 2 * p, e1 = 2 * p + 1;
    vd[e0] = vs[e0];
    if (e1 < head_dim) vd[e1] = vs[e1];
    if (p < k.n_rot) {
        int d0, d1;
        rope_pair_dims(k, p, &d0, &d1);
        float x0 = key_f32(ks, d0), x1 = key_f32(ks, d1);
        const float t = rope_angle(k, pos, p);
        rope_rotate(&x0, &x1, cos_f(t), sin_f(t));
        kd[d0] = f2h(x0);
        kd[d1] = f2h(x1);
    } else {
        kd[e0] = f2h(key_f32(ks, e0));
        if (e1 < head_dim) kd[e1] = f2h(key_f32(ks, e1));
    }
}

}  // namespace hd
}  // namespace cacheblend
