#include "core/kvstore/chunk-hash.h"

#include <atomic>
#include <cstring>

#include "core/kvstore/sha256.h"

namespace cacheblend {

namespace {

// Domain tag: keys never collide with other SHA-256 uses, and a change of this encoding gets a
// new tag (v2) rather than silently aliasing old files.
constexpr char k_domain[] = "cacheblend-chunk-v1";

void put_u64(sha256_ctx& c, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    c.update(b, 8);
}

// Length-prefixed, little-endian token array: (preamble, chunk) splits are unambiguous.
void put_tokens(sha256_ctx& c, const std::vector<token_id>& t) {
    put_u64(c, t.size());
    uint8_t buf[256];
    size_t used = 0;
    for (token_id id : t) {
        const uint32_t u = static_cast<uint32_t>(id);
        for (int i = 0; i < 4; ++i) buf[used++] = static_cast<uint8_t>(u >> (8 * i));
        if (used == sizeof(buf)) {
            c.update(buf, used);
            used = 0;
        }
    }
    c.update(buf, used);
}

}  // namespace

std::string chunk_key::hex() const {
    static const char digits[] = "0123456789abcdef";
    std::string s(64, '0');
    for (int i = 0; i < 32; ++i) {
        s[2 * i] = digits[bytes[i] >> 4];
        s[2 * i + 1] = digits[bytes[i] & 15];
    }
    return s;
}

bool parse_chunk_key(const std::string& hex, chunk_key* out) {
    if (hex.size() != 64) return false;
    auto nibble = [](char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    chunk_key k;
    for (size_t i = 0; i < 32; ++i) {
        const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        k.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
    }
    *out = k;
    return true;
}

bool chunk_key::operator==(const chunk_key& o) const {
    return std::memcmp(bytes, o.bytes, sizeof(bytes)) == 0;
}

namespace {
std::atomic<uint64_t> g_keys_made{0};
}  // namespace

uint64_t chunk_keys_made() { return g_keys_made.load(std::memory_order_relaxed); }

chunk_key make_chunk_key(uint64_t model_fingerprint, uint32_t kv_format,
                         const std::vector<token_id>& preamble,
                         const std::vector<token_id>& chunk) {
    g_keys_made.fetch_add(1, std::memory_order_relaxed);
    sha256_ctx c;
    c.update(k_domain, sizeof(k_domain));  // includes the NUL: the tag is self-delimiting
    put_u64(c, model_fingerprint);
    put_u64(c, kv_format);
    put_tokens(c, preamble);
    put_tokens(c, chunk);
    chunk_key k;
    c.final(k.bytes);
    return k;
}

}  // namespace cacheblend
