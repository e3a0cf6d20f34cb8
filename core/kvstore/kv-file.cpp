#include "core/kvstore/kv-file.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/util/private-path.h"
#include "kernels/fp16.h"

// Payload rows (f16, int8) are stored in host order; header fields are encoded explicitly.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "kv files assume a little-endian host");

namespace cacheblend {

// ---- xxh64 ----

namespace {

constexpr uint64_t P1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t P2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t P3 = 0x165667B19E3779F9ull;
constexpr uint64_t P4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t P5 = 0x27D4EB2F165667C5ull;

inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t rd64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline uint32_t rd32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline uint64_t xround(uint64_t acc, uint64_t in) {
    acc += in * P2;
    acc = rotl64(acc, 31);
    return acc * P1;
}
inline uint64_t xmerge(uint64_t acc, uint64_t v) {
    acc ^= xround(0, v);
    return acc * P1 + P4;
}

}  // namespace

uint64_t xxh64(const void* data, size_t n, uint64_t seed) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    const uint8_t* const end = p + n;
    uint64_t h;
    if (n >= 32) {
        uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        const uint8_t* const limit = end - 32;
        do {
            v1 = xround(v1, rd64(p));
            v2 = xround(v2, rd64(p + 8));
            v3 = xround(v3, rd64(p + 16));
            v4 = xround(v4, rd64(p + 24));
            p += 32;
        } while (p <= limit);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = xmerge(h, v1);
        h = xmerge(h, v2);
        h = xmerge(h, v3);
        h = xmerge(h, v4);
    } else {
        h = seed + P5;
    }
    h += static_cast<uint64_t>(n);
    for (; p + 8 <= end; p += 8) {
        h ^= xround(0, rd64(p));
        h = rotl64(h, 27) * P1 + P4;
    }
    if (p + 4 <= end) {
        h ^= static_cast<uint64_t>(rd32(p)) * P1;
        h = rotl64(h, 23) * P2 + P3;
        p += 4;
    }
    for (; p < end; ++p) {
        h ^= (*p) * P5;
        h = rotl64(h, 11) * P1;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

namespace kv_file {

const char magic[8] = {'C', 'B', 'L', 'K', 'V', 'S', 'T', '\0'};

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

void put32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get32(const uint8_t* p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
    return v;
}
uint64_t get64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
}

[[noreturn]] void bad(const char* why) { throw error(status::corrupt, fmt("kv file: %s", why)); }

bool known_format(uint32_t f) {
    return f == static_cast<uint32_t>(kv_format::f16) || f == static_cast<uint32_t>(kv_format::q8) ||
           f == static_cast<uint32_t>(kv_format::exact);
}

}  // namespace

uint64_t layer_seed(const chunk_key& key) { return get64(key.bytes); }

layout compute_layout(const chunk_kv_meta& m) {
    if (!known_format(static_cast<uint32_t>(m.format)))
        throw error(status::invalid_arg, fmt("kv file: unknown kv format %u",
                                             static_cast<unsigned>(m.format)));
    if (m.n_layer < 1 || m.n_layer > max_layers || m.n_kv_head < 1 || m.n_kv_head > max_kv_heads ||
        m.head_dim < 1 || m.head_dim > max_head_dim || m.kv_dim() > max_kv_dim ||
        m.n_tokens < 1 || m.n_tokens > max_tokens)
        throw error(status::invalid_arg,
                    fmt("kv file: shape out of range (layers %d, heads %d, head_dim %d, tokens %d)",
                        m.n_layer, m.n_kv_head, m.head_dim, m.n_tokens));
    layout l;
    const uint64_t t = static_cast<uint64_t>(m.n_tokens);
    const uint64_t kvd = static_cast<uint64_t>(m.kv_dim());
    l.header_size = fixed_header_bytes + 4 * t + layer_entry_bytes * uint64_t(m.n_layer) + 8;
    l.data_offset = align_up(l.header_size, alignment);
    if (m.format == kv_format::f16)
        l.layer_bytes = 2 * (t * kvd * 2);
    else if (m.format == kv_format::exact)
        l.layer_bytes = t * kvd * 4 + t * kvd * 2;
    else
        l.layer_bytes = 2 * (t * kvd + t * uint64_t(m.n_kv_head) * 2);
    l.layer_stride = align_up(l.layer_bytes, alignment);
    // Bounded above (2^22 tokens x 2^20 dims x 4 B = 2^44 per layer): no overflow in 64 bits.
    l.file_size = l.data_offset + l.layer_stride * uint64_t(m.n_layer);
    if (l.file_size > max_file_size)
        throw error(status::invalid_arg, fmt("kv file: %llu bytes is over the size limit",
                                             static_cast<unsigned long long>(l.file_size)));
    return l;
}

std::vector<uint8_t> encode_header(const header& h) {
    const layout l = compute_layout(h.meta);
    if (h.tokens.size() != static_cast<size_t>(h.meta.n_tokens) ||
        h.layers.size() != static_cast<size_t>(h.meta.n_layer))
        throw error(status::invalid_arg, "kv file: token or layer count does not match the shape");
    std::vector<uint8_t> out(l.header_size, 0);
    uint8_t* p = out.data();
    std::memcpy(p, magic, 8);
    put32(p + 8, h.version);
    put32(p + 12, static_cast<uint32_t>(l.header_size));
    put64(p + 16, h.meta.model_fingerprint);
    put32(p + 24, static_cast<uint32_t>(h.meta.format));
    put32(p + 28, static_cast<uint32_t>(h.meta.n_layer));
    put32(p + 32, static_cast<uint32_t>(h.meta.n_kv_head));
    put32(p + 36, static_cast<uint32_t>(h.meta.head_dim));
    put32(p + 40, static_cast<uint32_t>(h.meta.n_tokens));
    put32(p + 44, static_cast<uint32_t>(alignment));
    put64(p + 48, l.file_size);
    std::memcpy(p + 56, h.key.bytes, 32);
    uint8_t* q = p + fixed_header_bytes;
    for (token_id id : h.tokens) {
        put32(q, static_cast<uint32_t>(id));
        q += 4;
    }
    for (const layer_entry& e : h.layers) {
        put64(q, e.offset);
        put64(q + 8, e.size);
        put64(q + 16, e.checksum);
        q += layer_entry_bytes;
    }
    put64(q, xxh64(p, l.header_size - 8));
    return out;
}

header decode_header(const uint8_t* data, size_t n, uint64_t file_size) {
    if (n < 16) bad("truncated header");
    if (std::memcmp(data, magic, 8) != 0) bad("bad magic (not a KV file)");
    header h;
    h.version = get32(data + 8);
    if (h.version == 0) bad("format version 0");
    if (h.version > version)
        throw error(status::format, fmt("kv file: format version %u is newer than this "
                                        "library's (%u)", h.version, version));
    if (h.version < version)
        throw error(status::unsupported, fmt("kv file: format version %u is older than this "
                                             "library's (%u)", h.version, version));
    const uint64_t header_size = get32(data + 12);
    if (header_size < fixed_header_bytes + 8 || header_size > n) bad("header size out of range");
    const uint64_t sum = get64(data + header_size - 8);
    if (xxh64(data, header_size - 8) != sum) bad("header checksum mismatch");

    const uint32_t fmt_code = get32(data + 24);
    if (!known_format(fmt_code)) bad("unknown kv format");
    h.meta.model_fingerprint = get64(data + 16);
    h.meta.format = static_cast<kv_format>(fmt_code);
    const uint32_t dims[4] = {get32(data + 28), get32(data + 32), get32(data + 36),
                              get32(data + 40)};
    for (uint32_t d : dims)
        if (d > 0x7fffffffu) bad("shape out of range");
    h.meta.n_layer = static_cast<int32_t>(dims[0]);
    h.meta.n_kv_head = static_cast<int32_t>(dims[1]);
    h.meta.head_dim = static_cast<int32_t>(dims[2]);
    h.meta.n_tokens = static_cast<int32_t>(dims[3]);
    layout l;
    try {
        l = compute_layout(h.meta);
    } catch (const error&) {
        bad("shape out of range");
    }
    if (l.header_size != header_size) bad("header size does not match the shape");
    if (get32(data + 44) != alignment) bad("unexpected layer alignment");
    if (get64(data + 48) != l.file_size) bad("recorded file size does not match the shape");
    if (file_size < l.file_size) bad("file is truncated");
    if (file_size > l.file_size) bad("file has trailing bytes");
    std::memcpy(h.key.bytes, data + 56, 32);

    const uint8_t* q = data + fixed_header_bytes;
    h.tokens.resize(static_cast<size_t>(h.meta.n_tokens));
    for (token_id& id : h.tokens) {
        id = static_cast<token_id>(get32(q));
        q += 4;
    }
    h.layers.resize(static_cast<size_t>(h.meta.n_layer));
    for (size_t i = 0; i < h.layers.size(); ++i) {
        layer_entry& e = h.layers[i];
        e.offset = get64(q);
        e.size = get64(q + 8);
        e.checksum = get64(q + 16);
        q += layer_entry_bytes;
        if (e.offset != l.data_offset + i * l.layer_stride || e.size != l.layer_bytes)
            bad("layer table does not match the shape");
    }
    // The padding after the header is not under the checksum: it must be zero.
    const size_t pad_end = static_cast<size_t>(std::min<uint64_t>(n, l.data_offset));
    for (size_t i = header_size; i < pad_end; ++i)
        if (data[i] != 0) bad("non-zero header padding");
    return h;
}

void encode_layer(const chunk_kv_meta& m, const float* k, const float* v, int64_t ld,
                  uint8_t* out) {
    const int64_t T = m.n_tokens, D = m.kv_dim(), H = m.n_kv_head, hd = m.head_dim;
    if (m.format == kv_format::f16 || m.format == kv_format::exact) {
        uint8_t* p = out;
        for (int64_t t = 0; t < T; ++t) {
            if (m.format == kv_format::f16) {
                fp32_to_fp16_row(k + t * ld, reinterpret_cast<uint16_t*>(p), D);
                p += D * 2;
            } else {
                std::memcpy(p, k + t * ld, static_cast<size_t>(D) * 4);  // little-endian f32
                p += D * 4;
            }
        }
        for (int64_t t = 0; t < T; ++t) {
            fp32_to_fp16_row(v + t * ld, reinterpret_cast<uint16_t*>(p), D);
            p += D * 2;
        }
        return;
    }
    // q8: one f16 scale per (token, head). Quantize with the *stored* f16 scale so the reader's
    // int8 * scale is the value we meant: |x - q*s| <= s/2, s = amax/127 rounded up to an f16.
    const float* src[2] = {k, v};
    uint8_t* p = out;
    for (int kv = 0; kv < 2; ++kv) {
        int8_t* qd = reinterpret_cast<int8_t*>(p);
        uint8_t* sd = p + T * D;
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t h = 0; h < H; ++h) {
                const float* x = src[kv] + t * ld + h * hd;
                float amax = 0.0f;
                bool finite = true;
                for (int64_t d = 0; d < hd; ++d) {
                    const float a = std::fabs(x[d]);
                    finite &= a <= FLT_MAX;  // false for inf and NaN
                    amax = std::max(amax, a);
                }
                if (!finite) throw error(status::invalid_arg, "kv file: non-finite value in q8 KV");
                // Round the scale up, never down: then |x / s| <= 127 and nothing clamps, which
                // matters when amax/127 is an f16 subnormal with only a few significant bits.
                const float want = amax / 127.0f;
                uint16_t s16 = fp32_to_fp16(want);
                if (fp16_to_fp32(s16) < want) ++s16;  // next half up (inf past 65504)
                const float s = fp16_to_fp32(s16);
                if (!std::isfinite(s))
                    throw error(status::invalid_arg, "kv file: value too large for q8 KV");
                const float inv = s > 0.0f ? 1.0f / s : 0.0f;
                int8_t* qrow = qd + t * D + h * hd;
                for (int64_t d = 0; d < hd; ++d) {
                    // round to nearest even by the 1.5 * 2^23 trick (|x * inv| <= 127.x): a
                    // plain add the compiler vectorizes, where nearbyint is a libm call on the
                    // SSE2 baseline
                    const float r = (x[d] * inv + 12582912.0f) - 12582912.0f;
                    qrow[d] = static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, r)));
                }
                std::memcpy(sd + (t * H + h) * 2, &s16, 2);
            }
        }
        p += T * D + T * H * 2;
    }
}

void check_read_args(const chunk_kv_meta& m, int32_t layer, const void* k, dtype k_type,
                     const uint16_t* v, int64_t ld, const char* who) {
    if (layer < 0 || layer >= m.n_layer)
        throw error(status::invalid_arg, fmt("%s: layer %d of %d", who, layer, m.n_layer));
    if (ld < m.kv_dim() || !k || !v)
        throw error(status::invalid_arg, fmt("%s: read_layer needs K, V and ld >= kv_dim", who));
    if (k_type != dtype::f32 && k_type != stored_k_type(m.format))
        throw error(status::invalid_arg, fmt("%s: K of the %s format cannot be read as %s (f32%s)",
                                             who, kv_format_name(m.format), dtype_name(k_type),
                                             m.format == kv_format::f16 ? " or f16" : ""));
}

void decode_layer(const chunk_kv_meta& m, const uint8_t* payload, void* k_out, dtype k_type,
                  uint16_t* v, int64_t ld) {
    const int64_t T = m.n_tokens, D = m.kv_dim(), H = m.n_kv_head, hd = m.head_dim;
    if (k_type != dtype::f32 && k_type != stored_k_type(m.format))
        throw error(status::invalid_arg, "kvstore: decode_layer: K type not given by this format");
    if (m.format == kv_format::f16 || m.format == kv_format::exact) {
        const uint8_t* p = payload;
        for (int64_t t = 0; t < T; ++t) {
            if (k_type == dtype::f16) {  // the f16 format: copied as stored
                std::memcpy(static_cast<uint16_t*>(k_out) + t * ld, p, static_cast<size_t>(D) * 2);
                p += D * 2;
            } else if (m.format == kv_format::f16) {
                fp16_to_fp32_row(reinterpret_cast<const uint16_t*>(p),
                                 static_cast<float*>(k_out) + t * ld, D);
                p += D * 2;
            } else {
                std::memcpy(static_cast<float*>(k_out) + t * ld, p, static_cast<size_t>(D) * 4);
                p += D * 4;
            }
        }
        if (ld == D) {
            std::memcpy(v, p, static_cast<size_t>(T * D * 2));
            return;
        }
        for (int64_t t = 0; t < T; ++t)
            std::memcpy(v + t * ld, p + t * D * 2, static_cast<size_t>(D * 2));
        return;
    }
    // q8: K is handed over in f32 as int8 * scale; V rounded to f16 like the other formats.
    std::vector<float> row(static_cast<size_t>(D));
    const uint8_t* p = payload;
    for (int kv = 0; kv < 2; ++kv) {
        const int8_t* qd = reinterpret_cast<const int8_t*>(p);
        const uint8_t* sd = p + T * D;
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t h = 0; h < H; ++h) {
                uint16_t s16;
                std::memcpy(&s16, sd + (t * H + h) * 2, 2);
                const float s = fp16_to_fp32(s16);
                const int8_t* q = qd + t * D + h * hd;
                for (int64_t d = 0; d < hd; ++d) row[h * hd + d] = static_cast<float>(q[d]) * s;
            }
            if (kv == 0)
                std::memcpy(static_cast<float*>(k_out) + t * ld, row.data(),
                            static_cast<size_t>(D) * sizeof(float));
            else
                fp32_to_fp16_row(row.data(), v + t * ld, D);
        }
        p += T * D + T * H * 2;
    }
}

// ---- builder ----

builder::builder(const chunk_kv_meta& meta, const chunk_key& key, std::vector<token_id> tokens) {
    layout_ = compute_layout(meta);
    if (tokens.size() != static_cast<size_t>(meta.n_tokens))
        throw error(status::invalid_arg, fmt("kvstore: %zu tokens for a %d-token chunk",
                                             tokens.size(), meta.n_tokens));
    hdr_.meta = meta;
    hdr_.key = key;
    hdr_.tokens = std::move(tokens);
    hdr_.layers.resize(static_cast<size_t>(meta.n_layer));
    for (size_t i = 0; i < hdr_.layers.size(); ++i) {
        hdr_.layers[i].offset = layout_.data_offset + i * layout_.layer_stride;
        hdr_.layers[i].size = layout_.layer_bytes;
    }
    buf_ = make_aligned_buffer(static_cast<size_t>(layout_.file_size));
    have_.assign(static_cast<size_t>(meta.n_layer), false);
}

void builder::put_layer(int32_t layer, const float* k, const float* v, int64_t ld) {
    if (layer < 0 || layer >= hdr_.meta.n_layer)
        throw error(status::invalid_arg, fmt("kvstore: layer %d of %d", layer, hdr_.meta.n_layer));
    if (ld < hdr_.meta.kv_dim() || !k || !v)
        throw error(status::invalid_arg, "kvstore: put_layer needs K, V and ld >= kv_dim");
    layer_entry& e = hdr_.layers[static_cast<size_t>(layer)];
    uint8_t* dst = buf_.get() + e.offset;
    encode_layer(hdr_.meta, k, v, ld, dst);
    std::memset(dst + layout_.layer_bytes, 0,
                static_cast<size_t>(layout_.layer_stride - layout_.layer_bytes));
    e.checksum = xxh64(dst, static_cast<size_t>(layout_.layer_stride), layer_seed(hdr_.key));
    have_[static_cast<size_t>(layer)] = true;
}

bool builder::complete() const {
    return std::all_of(have_.begin(), have_.end(), [](bool b) { return b; });
}

void builder::write(file_io& io, int fd, const std::string& path) {
    for (size_t i = 0; i < have_.size(); ++i)
        if (!have_[i])
            throw error(status::misuse, fmt("kvstore: commit without layer %zu of %s", i,
                                            hdr_.key.hex().c_str()));
    const std::vector<uint8_t> h = encode_header(hdr_);
    std::memcpy(buf_.get(), h.data(), h.size());
    std::memset(buf_.get() + h.size(), 0, static_cast<size_t>(layout_.data_offset - h.size()));
    auto put = [&](uint64_t off, uint64_t n) {
        const int err = io.pwrite(fd, buf_.get() + off, static_cast<size_t>(n), off);
        if (err != 0)
            throw error(status::io_write, fmt("kvstore: write %llu B at %llu of %s: %s",
                                              static_cast<unsigned long long>(n),
                                              static_cast<unsigned long long>(off), path.c_str(),
                                              errno_name(err).c_str()));
    };
    put(0, layout_.data_offset);
    for (const layer_entry& e : hdr_.layers) put(e.offset, layout_.layer_stride);
}

}  // namespace kv_file

// ---- reader ----

kv_file_reader::kv_file_reader(std::shared_ptr<file_io> io, io_fd fd, std::string path,
                               kv_file::header h, const file_stat& st)
    : io_(std::move(io)), fd_(std::move(fd)), path_(std::move(path)), hdr_(std::move(h)),
      st_(st) {
    layout_ = kv_file::compute_layout(hdr_.meta);
}

void kv_file_reader::corrupt(const std::string& why) {
    if (on_corrupt_) {
        auto fn = std::move(on_corrupt_);
        on_corrupt_ = nullptr;
        fn();
    }
    throw error(status::corrupt, fmt("kvstore: %s: %s", path_.c_str(), why.c_str()));
}

void kv_file_reader::read_layer_as(int32_t layer, void* k, dtype k_type, uint16_t* v, int64_t ld) {
    kv_file::check_read_args(hdr_.meta, layer, k, k_type, v, ld, "kvstore");
    if (!buf_) buf_ = make_aligned_buffer(static_cast<size_t>(layout_.layer_stride));
    const kv_file::layer_entry& e = hdr_.layers[static_cast<size_t>(layer)];
    const size_t n = static_cast<size_t>(layout_.layer_stride);
    size_t got = 0;
    const int err = io_->pread(fd_.get(), buf_.get(), n, e.offset, &got);
    if (err != 0)
        throw error(status::io_read, fmt("kvstore: read %zu B at %llu of %s: %s", n,
                                         static_cast<unsigned long long>(e.offset), path_.c_str(),
                                         errno_name(err).c_str()));
    bytes_read_ += got;
    if (got != n) corrupt(fmt("layer %d is truncated", layer));
    if (xxh64(buf_.get(), n, kv_file::layer_seed(hdr_.key)) != e.checksum)
        corrupt(fmt("layer %d checksum mismatch", layer));
    kv_file::decode_layer(hdr_.meta, buf_.get(), k, k_type, v, ld);
}

// ---- open + verify ----

kv_open_result open_kv_file(const std::shared_ptr<file_io>& io, const std::string& path,
                            const chunk_key& key, const chunk_kv_meta& expect, bool direct_io) {
    return open_kv_file(io, path, key, &expect, direct_io);
}

kv_open_result open_kv_file(const std::shared_ptr<file_io>& io, const std::string& path,
                            const chunk_key& key, const chunk_kv_meta* expect, bool direct_io) {
    kv_open_result r;
    int fd = -1;
    int err = ENOENT;
    // O_NOFOLLOW: a symlink planted in the store must not make us read (and then serve) a file
    // from elsewhere; O_NONBLOCK: a FIFO at the path must not hang the lookup.
    const int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK;
    if (direct_io) {
        err = io->open(path, flags | O_DIRECT, 0, &fd);
        if (err == EINVAL) err = io->open(path, flags, 0, &fd);  // tmpfs etc.: no O_DIRECT
    } else {
        err = io->open(path, flags, 0, &fd);
    }
    if (err == ELOOP) {
        // The link itself is what gets removed: remember its identity, not its target's.
        r.have_st = io->lstat(path, &r.st) == 0;
        r.status = kv_open_status::corrupt;
        r.detail = fmt("%s: symbolic link (not followed)", path.c_str());
        return r;
    }
    if (err != 0) {
        r.status = err == ENOENT ? kv_open_status::missing : kv_open_status::io_error;
        r.detail = fmt("open %s: %s", path.c_str(), errno_name(err).c_str());
        return r;
    }
    io_fd f(io.get(), fd);
    err = io->fstat(fd, &r.st);
    if (err != 0) {
        r.status = kv_open_status::io_error;
        r.detail = fmt("fstat %s: %s", path.c_str(), errno_name(err).c_str());
        return r;
    }
    r.have_st = true;
    auto fail = [&](kv_open_status s, const std::string& why) {
        r.status = s;
        r.detail = fmt("%s: %s", path.c_str(), why.c_str());
        return std::move(r);
    };
    if (!r.st.is_reg) return fail(kv_open_status::corrupt, "not a regular file");
    if (const std::string why = private_path_problem(r.st); !why.empty())
        return fail(kv_open_status::corrupt, why);
    if (r.st.size < kv_file::alignment) return fail(kv_open_status::corrupt, "file is truncated");

    // One aligned block holds the header of any chunk up to ~1000 tokens; read more if needed.
    size_t want = static_cast<size_t>(kv_file::alignment);
    aligned_buffer buf = make_aligned_buffer(want);
    size_t got = 0;
    err = io->pread(fd, buf.get(), want, 0, &got);
    if (err != 0)
        return fail(kv_open_status::io_error, fmt("read header: %s", errno_name(err).c_str()));
    if (got != want) return fail(kv_open_status::corrupt, "file is truncated");
    if (std::memcmp(buf.get(), kv_file::magic, 8) == 0) {
        const uint32_t ver = kv_file::get32(buf.get() + 8);
        const uint64_t hs = kv_file::get32(buf.get() + 12);
        if (ver == kv_file::version && hs > want) {
            if (hs > kv_file::max_header_bytes)
                return fail(kv_open_status::corrupt, "header size out of range");
            const uint64_t need = (hs + kv_file::alignment - 1) / kv_file::alignment *
                                  kv_file::alignment;
            if (need > r.st.size) return fail(kv_open_status::corrupt, "file is truncated");
            want = static_cast<size_t>(need);
            buf = make_aligned_buffer(want);
            err = io->pread(fd, buf.get(), want, 0, &got);
            if (err != 0)
                return fail(kv_open_status::io_error,
                            fmt("read header: %s", errno_name(err).c_str()));
            if (got != want) return fail(kv_open_status::corrupt, "file is truncated");
        }
    }
    kv_file::header h;
    try {
        h = kv_file::decode_header(buf.get(), want, r.st.size);
    } catch (const error& e) {
        const kv_open_status s = e.code() == status::format        ? kv_open_status::future_version
                                 : e.code() == status::unsupported ? kv_open_status::foreign
                                                                   : kv_open_status::corrupt;
        return fail(s, e.what());
    }
    if (h.key != key) return fail(kv_open_status::corrupt, "holds another chunk key");
    const chunk_kv_meta& m = h.meta;
    if (expect && (m.model_fingerprint != expect->model_fingerprint ||
                   m.format != expect->format || m.n_layer != expect->n_layer ||
                   m.n_kv_head != expect->n_kv_head || m.head_dim != expect->head_dim ||
                   m.n_tokens != expect->n_tokens))
        return fail(kv_open_status::foreign,
                    fmt("foreign chunk (model %016llx format %s layers %d heads %d x %d tokens %d)",
                        static_cast<unsigned long long>(m.model_fingerprint),
                        kv_format_name(m.format), m.n_layer, m.n_kv_head, m.head_dim,
                        m.n_tokens));
    r.status = kv_open_status::ok;
    r.reader = std::make_unique<kv_file_reader>(io, std::move(f), path, std::move(h), r.st);
    return r;
}

}  // namespace cacheblend
