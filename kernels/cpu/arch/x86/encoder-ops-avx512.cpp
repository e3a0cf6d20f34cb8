// AVX512 build of the encoder ops (kernels/cpu/encoder-ops-impl.h, 16 floats per vector).
#define CBL_ENC_VW 16
#define CBL_ENC_NS enc_avx512
#include "kernels/cpu/encoder-ops-impl.h"
#include "kernels/cpu/encoder-ops-isa.h"

namespace cacheblend {
namespace enc {

const isa_kernels& avx512_kernels() {
    static const isa_kernels k = {CBL_ENC_VW, &enc_avx512::attention_head, &enc_avx512::gelu_row};
    return k;
}

}  // namespace enc
}  // namespace cacheblend
