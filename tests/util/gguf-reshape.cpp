#include "util/gguf-reshape.h"

#include <cstring>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/model/gguf.h"
#include "core/util/error.h"
#include "util/gguf-writer.h"

namespace cbltest {
namespace {

using cacheblend::error;
using cacheblend::gguf_file;
using cacheblend::gguf_tensor;
using cacheblend::status;
using vt = cacheblend::gguf_value_type;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Copies one scalar or array value that the reshape leaves as it is.
void copy_value(const gguf_file& f, const std::string& key, gguf_builder& b) {
    const vt t = *f.type_of(key);
    switch (t) {
        case vt::u8: b.set_u8(key, uint8_t(*f.get_int(key))); break;
        case vt::i8: b.set_i8(key, int8_t(*f.get_int(key))); break;
        case vt::u16: b.set_u16(key, uint16_t(*f.get_int(key))); break;
        case vt::i16: b.set_i16(key, int16_t(*f.get_int(key))); break;
        case vt::u32: b.set_u32(key, uint32_t(*f.get_int(key))); break;
        case vt::i32: b.set_i32(key, int32_t(*f.get_int(key))); break;
        case vt::u64: b.set_u64(key, uint64_t(*f.get_int(key))); break;
        case vt::i64: b.set_i64(key, *f.get_int(key)); break;
        case vt::f32: b.set_f32(key, float(*f.get_float(key))); break;
        case vt::f64: b.set_f64(key, *f.get_float(key)); break;
        case vt::boolean: b.set_bool(key, *f.get_bool(key)); break;
        case vt::string: b.set_str(key, *f.get_string(key)); break;
        case vt::array: {
            const vt e = f.array_info(key)->elem_type;
            if (e == vt::string) {
                b.set_arr_str(key, *f.get_string_array(key));
            } else if (e == vt::f32 || e == vt::f64) {
                b.set_arr_f32(key, *f.get_float_array(key));
            } else if (e == vt::boolean) {
                const auto v = *f.get_int_array(key);
                b.set_arr_bool(key, std::vector<bool>(v.begin(), v.end()));
            } else {
                const auto v = *f.get_int_array(key);
                b.set_arr_i64(key, std::vector<int64_t>(v.begin(), v.end()));
            }
            break;
        }
    }
}

// The tokenizer's arrays resized to n tokens.
void reshape_vocab(const gguf_file& f, int64_t n, gguf_builder& b) {
    const auto tokens = *f.get_string_array_view("tokenizer.ggml.tokens");
    const int64_t n_src = static_cast<int64_t>(tokens.size());
    std::vector<std::string> out;
    out.reserve(size_t(n));
    for (int64_t r = 0; r < n; ++r) {
        out.push_back(r < n_src ? std::string(tokens[size_t(r)])
                                : "<|cbl_fill_" + std::to_string(r) + "|>");
    }
    b.set_arr_str("tokenizer.ggml.tokens", out);
    if (f.has("tokenizer.ggml.scores")) {
        const auto s = *f.get_float_array("tokenizer.ggml.scores");
        std::vector<float> v(size_t(n), 0.f);
        for (int64_t r = 0; r < std::min(n, n_src); ++r) v[size_t(r)] = s[size_t(r)];
        b.set_arr_f32("tokenizer.ggml.scores", v);
    }
    if (f.has("tokenizer.ggml.token_type")) {
        const auto s = *f.get_int_array("tokenizer.ggml.token_type");
        std::vector<int32_t> v(size_t(n), 1);  // 1: normal
        for (int64_t r = 0; r < std::min(n, n_src); ++r) v[size_t(r)] = int32_t(s[size_t(r)]);
        b.set_arr_i32("tokenizer.ggml.token_type", v);
    }
    if (f.has("tokenizer.ggml.merges")) {
        const auto merges = *f.get_string_array_view("tokenizer.ggml.merges");
        std::unordered_set<std::string_view> kept;
        for (int64_t r = 0; r < std::min(n, n_src); ++r) kept.insert(tokens[size_t(r)]);
        std::vector<std::string> m;
        std::string joined;
        for (std::string_view s : merges) {
            const size_t sp = s.find(' ', 1);
            if (n < n_src) {
                if (sp == std::string_view::npos) continue;
                joined.assign(s.substr(0, sp));
                joined.append(s.substr(sp + 1));
                if (!kept.count(s.substr(0, sp)) || !kept.count(s.substr(sp + 1)) ||
                    !kept.count(joined)) {
                    continue;
                }
            }
            m.emplace_back(s);
        }
        b.set_arr_str("tokenizer.ggml.merges", m);
    }
}

// Rows r = source row (r mod rows) of a 2-D tensor.
std::vector<uint8_t> cycle_rows(const gguf_tensor& t, int64_t rows) {
    const int64_t src_rows = t.ne[1];
    const size_t row_bytes = t.nbytes / size_t(src_rows);
    std::vector<uint8_t> out(row_bytes * size_t(rows));
    for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(out.data() + size_t(r) * row_bytes, t.data + size_t(r % src_rows) * row_bytes,
                    row_bytes);
    }
    return out;
}

}  // namespace

void reshape_gguf(const std::string& src, const std::string& dst, const gguf_reshape_params& p) {
    const auto f = gguf_file::open(src);
    const std::string arch = f->get_string("general.architecture").value_or("");
    const std::string block_count = arch + ".block_count";
    const auto layers = f->get_int(block_count);
    const auto tokens = f->array_info("tokenizer.ggml.tokens");
    if (arch.empty() || !layers || *layers <= 0 || !tokens) {
        throw error(status::format,
                    "reshape: " + src + " has no architecture, block_count or tokens");
    }
    const int64_t n_layer = p.n_layer > 0 ? p.n_layer : *layers;
    const int64_t n_vocab = p.n_vocab > 0 ? p.n_vocab : int64_t(tokens->count);

    gguf_builder b;
    b.set_alignment(uint32_t(f->alignment()));
    for (const std::string& key : f->keys()) {
        if (key == "general.alignment") continue;  // set_alignment writes it
        if (key == block_count) {
            b.set_u32(key, uint32_t(n_layer));
        } else if (key == "tokenizer.ggml.tokens") {
            reshape_vocab(*f, n_vocab, b);
        } else if (starts_with(key, "tokenizer.ggml.") && key.size() > 9 &&
                   key.compare(key.size() - 9, 9, "_token_id") == 0) {
            const auto id = f->get_int(key);
            if (id && *id >= 0 && *id < n_vocab) copy_value(*f, key, b);
        } else if (key == "tokenizer.ggml.scores" || key == "tokenizer.ggml.token_type" ||
                   key == "tokenizer.ggml.merges") {
            // written with the tokens
        } else {
            copy_value(*f, key, b);
        }
    }

    for (const gguf_tensor& t : f->tensors()) {
        if (!starts_with(t.name, "blk.")) {
            std::vector<int64_t> shape(t.ne, t.ne + t.n_dims);
            const bool per_token = t.name == "token_embd.weight" || t.name == "output.weight";
            if (per_token && t.n_dims == 2 && t.ne[1] == int64_t(tokens->count)) {
                shape[1] = n_vocab;
                b.add_tensor(t.name, t.type, shape, cycle_rows(t, n_vocab));
            } else {
                b.add_tensor(t.name, t.type, shape,
                             std::vector<uint8_t>(t.data, t.data + t.nbytes));
            }
        }
    }
    // Layers in order, each a copy of a source layer's tensors under the new index.
    for (int64_t i = 0; i < n_layer; ++i) {
        const std::string from = "blk." + std::to_string(i % *layers) + ".";
        const std::string to = "blk." + std::to_string(i) + ".";
        for (const gguf_tensor& t : f->tensors()) {
            if (!starts_with(t.name, from)) continue;
            b.add_tensor(to + t.name.substr(from.size()), t.type,
                         std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                         std::vector<uint8_t>(t.data, t.data + t.nbytes));
        }
    }
    b.write(dst);
}

}  // namespace cbltest
