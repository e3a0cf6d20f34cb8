// SHA-256 (FIPS 180-4), incremental. The one-shot sha256() is declared in
// core/kvstore/chunk-hash.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cacheblend {

class sha256_ctx {
public:
    sha256_ctx();
    void update(const void* data, size_t n);
    void final(uint8_t out[32]);  // the context is spent afterwards

private:
    void block(const uint8_t* p);

    uint32_t h_[8];
    uint64_t total_ = 0;  // bytes fed so far
    uint8_t buf_[64];
    size_t used_ = 0;
};

}  // namespace cacheblend
