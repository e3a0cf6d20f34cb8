// The two-tier chunk KV store (core/kvstore/kv-tiered.h): the remote reader (a header value,
// then one value per layer, each verified like the file it came from) and the write-through
// writer.
#include "core/kvstore/kv-tiered.h"

#include <cstdlib>
#include <cstring>

#include "core/kvstore/kv-file.h"
#include "core/util/error.h"

namespace cacheblend {
namespace {

std::string short_key(const chunk_key& key) { return key.hex().substr(0, 12); }

// Streams one chunk's layers from the shared tier. A value that is absent (evicted), of the wrong
// size or checksum is error(corrupt): the request drops the chunk (and its header) and recomputes
// it. A network failure is error(io_read) from a reader that is_remote(): the request recomputes
// the chunk too, and keeps the value.
class remote_kv_reader final : public chunk_kv_reader {
public:
    remote_kv_reader(std::shared_ptr<kv_remote> remote, kv_file::header h, uint64_t header_bytes)
        : remote_(std::move(remote)),
          hdr_(std::move(h)),
          layout_(kv_file::compute_layout(hdr_.meta)),
          bytes_read_(header_bytes) {}

    const chunk_kv_meta& meta() const override { return hdr_.meta; }
    const std::vector<token_id>& tokens() const override { return hdr_.tokens; }
    uint64_t bytes_read() const override { return bytes_read_; }
    bool is_remote() const override { return true; }

    void read_layer_as(int32_t layer, void* k, dtype k_type, uint16_t* v, int64_t ld) override {
        kv_file::check_read_args(hdr_.meta, layer, k, k_type, v, ld, "kv remote");
        std::string value;
        bool found = false;
        try {
            found = remote_->get(tiered_kv_store::layer_name(hdr_.key, layer), &value);
        } catch (const error& e) {
            throw error(status::io_read, std::string("kv remote: ") + e.what());
        }
        bytes_read_ += value.size();
        if (!found) corrupt(layer, "is gone (evicted or removed)");
        if (value.size() != layout_.layer_bytes) corrupt(layer, "has the wrong size");
        const size_t stride = static_cast<size_t>(layout_.layer_stride);
        if (!buf_) {
            buf_ = make_aligned_buffer(stride);
            std::memset(buf_.get(), 0, stride);  // the padding, under the checksum as on disk
        }
        std::memcpy(buf_.get(), value.data(), value.size());
        const kv_file::layer_entry& e = hdr_.layers[static_cast<size_t>(layer)];
        if (xxh64(buf_.get(), stride, kv_file::layer_seed(hdr_.key)) != e.checksum)
            corrupt(layer, "fails its checksum");
        kv_file::decode_layer(hdr_.meta, buf_.get(), k, k_type, v, ld);
    }

private:
    [[noreturn]] void corrupt(int32_t layer, const char* why) {
        throw error(status::corrupt, fmt("kv remote: layer %d of chunk %s %s", layer,
                                         short_key(hdr_.key).c_str(), why));
    }

    std::shared_ptr<kv_remote> remote_;
    kv_file::header hdr_;
    kv_file::layout layout_;
    aligned_buffer buf_;
    uint64_t bytes_read_ = 0;
};

// Checks a header value as open_kv_file checks a file's: it decodes, holds `key`, matches the
// model and shape. Returns an empty string when usable, else why not.
std::string check_header(const std::string& value, const chunk_key& key,
                         const chunk_kv_meta& expect, kv_file::header* out) {
    const auto* p = reinterpret_cast<const uint8_t*>(value.data());
    if (value.size() < kv_file::fixed_header_bytes + 8) return "truncated header";
    uint64_t file_size = 0;  // the header's own claim; decode_header checks it against the shape
    std::memcpy(&file_size, p + 48, 8);
    try {
        *out = kv_file::decode_header(p, value.size(), file_size);
    } catch (const error& e) {
        return e.what();
    }
    if (kv_file::compute_layout(out->meta).header_size != value.size())
        return "header has trailing bytes";
    if (out->key != key) return "holds another chunk key";
    const chunk_kv_meta& m = out->meta;
    if (m.model_fingerprint != expect.model_fingerprint || m.format != expect.format ||
        m.n_layer != expect.n_layer || m.n_kv_head != expect.n_kv_head ||
        m.head_dim != expect.head_dim || m.n_tokens != expect.n_tokens)
        return fmt("foreign chunk (model %016llx format %s layers %d tokens %d)",
                   static_cast<unsigned long long>(m.model_fingerprint), kv_format_name(m.format),
                   m.n_layer, m.n_tokens);
    return "";
}

}  // namespace

// Writes the local file (as the local store alone would) and then the shared values; a shared
// tier that fails is counted, never an error of the commit.
class tiered_writer final : public chunk_kv_writer {
public:
    tiered_writer(std::unique_ptr<chunk_kv_writer> local, std::shared_ptr<kv_remote> remote,
                  std::shared_ptr<tiered_kv_store::counters> n, const chunk_key& key,
                  const chunk_kv_meta& meta, const std::vector<token_id>& tokens)
        : local_(std::move(local)),
          remote_(std::move(remote)),
          n_(std::move(n)),
          key_(key),
          b_(meta, key, tokens) {}

    void put_layer(int32_t layer, const float* k, const float* v, int64_t ld) override {
        local_->put_layer(layer, k, v, ld);
        b_.put_layer(layer, k, v, ld);
    }

    void commit() override {
        local_->commit();
        if (!b_.complete()) return;  // the local commit already refused it (misuse)
        const std::vector<uint8_t> h = b_.encoded_header();
        std::vector<std::pair<std::string, std::string>> values;
        values.emplace_back(tiered_kv_store::header_name(key_),
                            std::string(reinterpret_cast<const char*>(h.data()), h.size()));
        const size_t n = static_cast<size_t>(b_.file_layout().layer_bytes);
        for (int32_t l = 0; l < b_.meta().n_layer; ++l) {
            values.emplace_back(tiered_kv_store::layer_name(key_, l),
                                std::string(reinterpret_cast<const char*>(b_.layer_payload(l)), n));
        }
        try {
            remote_->set_all(values);
            ++n_->writes;
        } catch (const error&) {
            ++n_->write_errors;  // the local copy stands; the chunk is recomputed elsewhere
        }
    }

private:
    std::unique_ptr<chunk_kv_writer> local_;
    std::shared_ptr<kv_remote> remote_;
    std::shared_ptr<tiered_kv_store::counters> n_;
    chunk_key key_;
    kv_file::builder b_;
};

tiered_kv_store::tiered_kv_store(std::shared_ptr<kv_store> local, std::shared_ptr<kv_remote> remote)
    : local_(std::move(local)), remote_(std::move(remote)), n_(std::make_shared<counters>()) {}

std::string tiered_kv_store::header_name(const chunk_key& key) {
    return "cbl:kv:" + key.hex() + ":hdr";
}

std::string tiered_kv_store::layer_name(const chunk_key& key, int32_t layer) {
    return "cbl:kv:" + key.hex() + fmt(":L%d", layer);
}

std::unique_ptr<chunk_kv_reader> tiered_kv_store::lookup(const chunk_key& key,
                                                         const chunk_kv_meta& expect) {
    return lookup_noted(key, expect, nullptr);
}

std::unique_ptr<chunk_kv_reader> tiered_kv_store::lookup_noted(const chunk_key& key,
                                                               const chunk_kv_meta& expect,
                                                               kv_lookup_info* info) {
    if (auto r = local_->lookup(key, expect)) return r;
    auto note = [&](const std::string& s) {
        if (info) info->notice = "kv remote: " + s;
    };
    std::string value;
    try {
        if (!remote_->get(header_name(key), &value)) {
            ++n_->misses;
            return nullptr;
        }
    } catch (const error& e) {
        ++n_->errors;
        note(std::string(e.what()) + "; local KV or recompute used");
        return nullptr;
    }
    kv_file::header h;
    const std::string why = check_header(value, key, expect, &h);
    if (!why.empty()) {
        ++n_->rejected;
        note("chunk " + short_key(key) + " not used (" + why + "): recomputed");
        return nullptr;
    }
    ++n_->hits;
    return std::make_unique<remote_kv_reader>(remote_, std::move(h), value.size());
}

std::unique_ptr<chunk_kv_writer> tiered_kv_store::create(const chunk_key& key,
                                                         const chunk_kv_meta& meta,
                                                         const std::vector<token_id>& tokens) {
    return std::make_unique<tiered_writer>(local_->create(key, meta, tokens), remote_, n_, key,
                                           meta, tokens);
}

bool tiered_kv_store::remove(const chunk_key& key) {
    const bool had = local_->remove(key);
    try {
        remote_->del({header_name(key)});  // the layers go with LRU or the next write
    } catch (const error&) {
        ++n_->errors;
    }
    return had;
}

std::shared_ptr<kv_store> with_shared_tier(std::shared_ptr<kv_store> local, std::string url) {
    if (url.empty()) {
        if (const char* env = std::getenv("CBL_KV_REMOTE")) url = env;
    }
    if (url.empty()) return local;
    return std::make_shared<tiered_kv_store>(std::move(local),
                                             open_kv_remote(parse_kv_remote_url(url)));
}

kv_remote_stats tiered_kv_store::remote_stats() const {
    kv_remote_stats s;
    s.hits = n_->hits;
    s.misses = n_->misses;
    s.rejected = n_->rejected;
    s.errors = n_->errors;
    s.writes = n_->writes;
    s.write_errors = n_->write_errors;
    return s;
}

}  // namespace cacheblend
