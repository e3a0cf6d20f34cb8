// Non-causal attention over packed sequences (kernels/cpu/encoder-ops.h). One task per
// (sequence, head): K of the head is transposed into a [head_dim][len] panel so scores are
// computed a block of queries x a vector of keys at a time, softmax uses a vector exp, and P·V
// accumulates rows of V (encoder-ops-impl.h, built per ISA). Head sizes the vector bodies do not
// cover take the scalar path below.
#include <algorithm>
#include <cmath>
#include <vector>

#define CBL_ENC_VW 4
#define CBL_ENC_NS enc_generic
#include "kernels/cpu/encoder-ops-impl.h"
#include "kernels/cpu/encoder-ops-isa.h"

namespace cacheblend {

namespace enc {

const isa_kernels& generic_kernels() {
    static const isa_kernels k = {CBL_ENC_VW, &enc_generic::attention_head,
                                  &enc_generic::gelu_row};
    return k;
}

const isa_kernels& kernels_for(cpu_isa isa) {
#if defined(__x86_64__)
    if (isa >= cpu_isa::avx512) return avx512_kernels();
    if (isa == cpu_isa::avx2) return avx2_kernels();
#endif
    return generic_kernels();
}

}  // namespace enc

namespace {

void attention_head_scalar(const encoder_attention_args& a, int s, int h,
                           std::vector<float>& buf) {
    const int hd = a.head_dim;
    const int64_t r0 = a.seq_start[s];
    const int64_t len = a.seq_start[s + 1] - r0;
    if (len <= 0) return;
    buf.assign(size_t(len + hd), 0.f);
    float* sc = buf.data();
    float* acc = sc + len;
    for (int64_t i = 0; i < len; ++i) {
        const float* qr = a.q + (r0 + i) * a.q_stride + int64_t(h) * hd;
        float mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
            const float* kr = a.k + (r0 + j) * a.kv_stride + int64_t(h) * hd;
            float d = 0.f;
            for (int t = 0; t < hd; ++t) d += qr[t] * kr[t];
            sc[j] = d * a.scale;
            mx = std::max(mx, sc[j]);
        }
        float sum = 0.f;
        std::fill(acc, acc + hd, 0.f);
        for (int64_t j = 0; j < len; ++j) {
            const float p = std::exp(sc[j] - mx);
            sum += p;
            const float* vr = a.v + (r0 + j) * a.kv_stride + int64_t(h) * hd;
            for (int t = 0; t < hd; ++t) acc[t] += p * vr[t];
        }
        float* o = a.out + (r0 + i) * a.out_stride + int64_t(h) * hd;
        for (int t = 0; t < hd; ++t) o[t] = acc[t] / sum;
    }
}

}  // namespace

void encoder_attention(thread_pool& pool, const encoder_attention_args& a) {
    if (a.n_seq <= 0 || a.n_head <= 0 || a.head_dim <= 0) return;
    const enc::isa_kernels& k = enc::kernels_for(cpu_isa_active());
    const bool vec = a.head_dim % k.vector_floats == 0 && a.head_dim <= 8 * k.vector_floats;
    const auto head = vec ? k.attention_head : &attention_head_scalar;
    pool.parallel_for(int64_t(a.n_seq) * a.n_head, 1, [&](int64_t begin, int64_t end) {
        std::vector<float> scratch;
        for (int64_t t = begin; t < end; ++t) {
            head(a, int(t / a.n_head), int(t % a.n_head), scratch);
        }
    });
}

}  // namespace cacheblend
