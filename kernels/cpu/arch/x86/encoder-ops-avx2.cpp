// AVX2 build of the encoder ops (kernels/cpu/encoder-ops-impl.h, 8 floats per vector).
#define CBL_ENC_VW 8
#define CBL_ENC_NS enc_avx2
#include "kernels/cpu/encoder-ops-impl.h"
#include "kernels/cpu/encoder-ops-isa.h"

namespace cacheblend {
namespace enc {

const isa_kernels& avx2_kernels() {
    static const isa_kernels k = {CBL_ENC_VW, &enc_avx2::attention_head, &enc_avx2::gelu_row};
    return k;
}

}  // namespace enc
}  // namespace cacheblend
