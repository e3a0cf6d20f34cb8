// Vector bodies of the encoder ops (kernels/cpu/encoder-ops.h), written once with GCC/Clang vector
// extensions and compiled three times: generic (encoder-attention.cpp, 4 floats), AVX2 and
// AVX-512 (arch/x86/encoder-ops-avx2.cpp / -avx512.cpp, 8 and 16 floats). The including file
// defines CBL_ENC_VW (floats per vector) and CBL_ENC_NS (its namespace) first.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/encoder-ops.h"

namespace cacheblend {
namespace CBL_ENC_NS {

constexpr int k_vw = CBL_ENC_VW;
typedef float vf __attribute__((vector_size(4 * CBL_ENC_VW)));
typedef int32_t vi __attribute__((vector_size(4 * CBL_ENC_VW)));

inline vf vload(const float* p) {
    vf v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}
inline void vstore(float* p, vf v) { std::memcpy(p, &v, sizeof(v)); }
inline vf vset(float x) { return vf{} + x; }

// expf by the Cephes polynomial (a few ulp on [-87, 88]); inputs are clamped to that range.
inline vf vexp(vf x) {
    x = x < vset(-87.f) ? vset(-87.f) : x;
    x = x > vset(88.f) ? vset(88.f) : x;
    const vf t = x * 1.44269504088896341f;
    const vi n = __builtin_convertvector(t + (t < vset(0.f) ? vset(-0.5f) : vset(0.5f)), vi);
    const vf nf = __builtin_convertvector(n, vf);
    vf r = x - nf * 0.693359375f;
    r = r - nf * -2.12194440e-4f;
    vf p = vset(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.f;
    const vi bits = (n + 127) << 23;
    vf scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    return p * scale;
}

// 0.5 x (1 + erf(x / sqrt 2)), erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
inline vf vgelu(vf x) {
    const vf z = x * 0.70710678118654752f;
    const vf az = z < vset(0.f) ? -z : z;
    const vf t = 1.f / (1.f + 0.3275911f * az);
    vf p = vset(1.061405429f);
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    const vf e = 1.f - p * t * vexp(-az * az);
    const vf erf = z < vset(0.f) ? -e : e;
    return 0.5f * x * (1.f + erf);
}

inline void gelu_row(float* x, int64_t n) {
    int64_t j = 0;
    for (; j + k_vw <= n; j += k_vw) vstore(x + j, vgelu(vload(x + j)));
    if (j < n) {
        float tmp[k_vw] = {};
        std::copy(x + j, x + n, tmp);
        vstore(tmp, vgelu(vload(tmp)));
        std::copy(tmp, tmp + (n - j), x + j);
    }
}

constexpr int k_mr = 4;  // query rows per block

// P (k_mr rows of stride lp) times V ([len][NC * k_vw]) into out rows.
template <int NC>
void attn_pv(const float* p, int64_t lp, const float* v, int64_t len, int mr, const float* inv,
             float* const* out) {
    vf acc[k_mr][NC] = {};
    for (int64_t j = 0; j < len; ++j) {
        vf vr[NC];
        for (int c = 0; c < NC; ++c) vr[c] = vload(v + j * NC * k_vw + c * k_vw);
        for (int i = 0; i < k_mr; ++i) {
            const vf pij = vset(p[i * lp + j]);
            for (int c = 0; c < NC; ++c) acc[i][c] += pij * vr[c];
        }
    }
    for (int i = 0; i < mr; ++i) {
        for (int c = 0; c < NC; ++c) vstore(out[i] + c * k_vw, acc[i][c] * inv[i]);
    }
}

// One (sequence, head) of encoder_attention; head_dim must be a multiple of k_vw, at most
// 8 * k_vw. buf: scratch reused across calls.
inline void attention_head(const encoder_attention_args& a, int s, int h, std::vector<float>& buf) {
    const int hd = a.head_dim;
    const int64_t r0 = a.seq_start[s];
    const int64_t len = a.seq_start[s + 1] - r0;
    if (len <= 0) return;
    const int64_t lp = (len + k_vw - 1) / k_vw * k_vw;
    buf.assign(size_t(hd * lp + len * hd + k_mr * lp), 0.f);
    float* kt = buf.data();             // [hd][lp], zero padded
    float* vv = kt + hd * lp;           // [len][hd]
    float* sc = vv + len * hd;          // [k_mr][lp]
    for (int64_t j = 0; j < len; ++j) {
        const float* kr = a.k + (r0 + j) * a.kv_stride + int64_t(h) * hd;
        const float* vr = a.v + (r0 + j) * a.kv_stride + int64_t(h) * hd;
        for (int d = 0; d < hd; ++d) kt[d * lp + j] = kr[d];
        std::copy(vr, vr + hd, vv + j * hd);
    }
    for (int64_t i0 = 0; i0 < len; i0 += k_mr) {
        const int mr = int(std::min<int64_t>(k_mr, len - i0));
        const float* q[k_mr];
        float* out[k_mr];
        for (int i = 0; i < k_mr; ++i) {
            const int64_t r = r0 + i0 + std::min(i, mr - 1);  // spare rows repeat the last one
            q[i] = a.q + r * a.q_stride + int64_t(h) * hd;
            out[i] = a.out + r * a.out_stride + int64_t(h) * hd;
        }
        // Scores: k_mr rows x k_vw keys per step, over head_dim.
        for (int64_t j = 0; j < lp; j += k_vw) {
            vf acc[k_mr] = {};
            for (int d = 0; d < hd; ++d) {
                const vf kv = vload(kt + d * lp + j);
                for (int i = 0; i < k_mr; ++i) acc[i] += vset(q[i][d] * a.scale) * kv;
            }
            for (int i = 0; i < k_mr; ++i) vstore(sc + i * lp + j, acc[i]);
        }
        float inv[k_mr];
        for (int i = 0; i < k_mr; ++i) {
            float* row = sc + i * lp;
            float mx = row[0];
            for (int64_t j = 1; j < len; ++j) mx = std::max(mx, row[j]);
            vf sum = {};
            for (int64_t j = 0; j < lp; j += k_vw) {
                vf e = vexp(vload(row + j) - mx);
                if (j + k_vw > len) {  // padded keys get weight 0
                    for (int64_t t = len - j; t < k_vw; ++t) e[t] = 0.f;
                }
                vstore(row + j, e);
                sum += e;
            }
            float total = 0.f;
            for (int t = 0; t < k_vw; ++t) total += sum[t];
            inv[i] = 1.f / total;
        }
        switch (hd / k_vw) {
            case 1: attn_pv<1>(sc, lp, vv, len, mr, inv, out); break;
            case 2: attn_pv<2>(sc, lp, vv, len, mr, inv, out); break;
            case 3: attn_pv<3>(sc, lp, vv, len, mr, inv, out); break;
            case 4: attn_pv<4>(sc, lp, vv, len, mr, inv, out); break;
            case 5: attn_pv<5>(sc, lp, vv, len, mr, inv, out); break;
            case 6: attn_pv<6>(sc, lp, vv, len, mr, inv, out); break;
            case 7: attn_pv<7>(sc, lp, vv, len, mr, inv, out); break;
            default: attn_pv<8>(sc, lp, vv, len, mr, inv, out); break;
        }
    }
}

}  // namespace CBL_ENC_NS
}  // namespace cacheblend
