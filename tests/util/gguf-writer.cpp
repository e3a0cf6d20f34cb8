#include "util/gguf-writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace cbltest {

namespace {

constexpr uint32_t k_magic = 0x46554747;  // "GGUF"

template <typename T>
std::vector<uint8_t> scalar(T v) {
    std::vector<uint8_t> out(sizeof v);
    std::memcpy(out.data(), &v, sizeof v);
    return out;
}

template <typename T>
std::vector<uint8_t> array(gguf_value_type et, const std::vector<T>& v) {
    byte_writer w;
    w.u32(static_cast<uint32_t>(et)).u64(v.size());
    for (const T& x : v) w.put(&x, sizeof x);
    return w.take();
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

byte_writer& byte_writer::put(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
    return *this;
}

byte_writer& byte_writer::pad_to(size_t alignment) {
    buf_.resize(align_up(buf_.size(), alignment), 0);
    return *this;
}

// ---- metadata ----

gguf_builder& gguf_builder::set_kv(const std::string& key, gguf_value_type t,
                                   std::vector<uint8_t> payload) {
    return set_raw(key, static_cast<uint32_t>(t), std::move(payload));
}

gguf_builder& gguf_builder::set_raw(const std::string& key, uint32_t type_id,
                                    std::vector<uint8_t> payload) {
    for (kv& e : kvs_) {
        if (e.key == key) {
            e.type = type_id;
            e.payload = std::move(payload);
            return *this;
        }
    }
    return append_raw(key, type_id, std::move(payload));
}

gguf_builder& gguf_builder::append_raw(const std::string& key, uint32_t type_id,
                                       std::vector<uint8_t> payload) {
    kvs_.push_back({key, type_id, std::move(payload)});
    return *this;
}

gguf_builder& gguf_builder::remove(const std::string& key) {
    for (size_t i = 0; i < kvs_.size();) {
        if (kvs_[i].key == key) {
            kvs_.erase(kvs_.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
            ++i;
        }
    }
    return *this;
}

bool gguf_builder::has(const std::string& key) const {
    for (const kv& e : kvs_) {
        if (e.key == key) return true;
    }
    return false;
}

#define CBL_SETTER(fn, T, vt) \
    gguf_builder& gguf_builder::fn(const std::string& key, T v) { \
        return set_kv(key, gguf_value_type::vt, scalar(v));       \
    }
CBL_SETTER(set_u8, uint8_t, u8)
CBL_SETTER(set_i8, int8_t, i8)
CBL_SETTER(set_u16, uint16_t, u16)
CBL_SETTER(set_i16, int16_t, i16)
CBL_SETTER(set_u32, uint32_t, u32)
CBL_SETTER(set_i32, int32_t, i32)
CBL_SETTER(set_u64, uint64_t, u64)
CBL_SETTER(set_i64, int64_t, i64)
CBL_SETTER(set_f32, float, f32)
CBL_SETTER(set_f64, double, f64)
#undef CBL_SETTER

gguf_builder& gguf_builder::set_bool(const std::string& key, bool v) {
    return set_kv(key, gguf_value_type::boolean, {static_cast<uint8_t>(v ? 1 : 0)});
}

gguf_builder& gguf_builder::set_str(const std::string& key, std::string_view v) {
    byte_writer w;
    w.str(v);
    return set_kv(key, gguf_value_type::string, w.take());
}

gguf_builder& gguf_builder::set_arr_str(const std::string& key, const std::vector<std::string>& v) {
    byte_writer w;
    w.u32(static_cast<uint32_t>(gguf_value_type::string)).u64(v.size());
    for (const std::string& s : v) w.str(s);
    return set_kv(key, gguf_value_type::array, w.take());
}

#define CBL_ARR_SETTER(fn, T, vt)                                                  \
    gguf_builder& gguf_builder::fn(const std::string& key, const std::vector<T>& v) { \
        return set_kv(key, gguf_value_type::array, array(gguf_value_type::vt, v));    \
    }
CBL_ARR_SETTER(set_arr_u8, uint8_t, u8)
CBL_ARR_SETTER(set_arr_i8, int8_t, i8)
CBL_ARR_SETTER(set_arr_u16, uint16_t, u16)
CBL_ARR_SETTER(set_arr_i16, int16_t, i16)
CBL_ARR_SETTER(set_arr_u32, uint32_t, u32)
CBL_ARR_SETTER(set_arr_i32, int32_t, i32)
CBL_ARR_SETTER(set_arr_u64, uint64_t, u64)
CBL_ARR_SETTER(set_arr_i64, int64_t, i64)
CBL_ARR_SETTER(set_arr_f32, float, f32)
CBL_ARR_SETTER(set_arr_f64, double, f64)
#undef CBL_ARR_SETTER

gguf_builder& gguf_builder::set_arr_bool(const std::string& key, const std::vector<bool>& v) {
    byte_writer w;
    w.u32(static_cast<uint32_t>(gguf_value_type::boolean)).u64(v.size());
    for (bool b : v) w.u8(b ? 1 : 0);
    return set_kv(key, gguf_value_type::array, w.take());
}

gguf_builder& gguf_builder::set_alignment(uint32_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        throw std::invalid_argument("gguf_builder: alignment must be a power of two");
    }
    alignment_ = alignment;
    return set_u32("general.alignment", alignment);
}

gguf_builder& gguf_builder::set_version(uint32_t version) {
    version_ = version;
    return *this;
}

// ---- tensors ----

size_t tensor_bytes(dtype type, const std::vector<int64_t>& shape) {
    const cacheblend::dtype_traits* info = cacheblend::dtype_info(type);
    if (!info) throw std::invalid_argument("gguf_builder: unsupported dtype");
    if (shape.empty() || shape.size() > 4) {
        throw std::invalid_argument("gguf_builder: shape needs 1 to 4 dims");
    }
    if (shape[0] % info->block_elems != 0) {
        throw std::invalid_argument("gguf_builder: ne[0] is not a multiple of the block size");
    }
    size_t n = static_cast<size_t>(shape[0] / info->block_elems) * info->block_bytes;
    for (size_t d = 1; d < shape.size(); ++d) n *= static_cast<size_t>(shape[d]);
    return n;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
    std::vector<uint8_t> out(v.size() * sizeof(float));
    if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
    return out;
}

gguf_builder& gguf_builder::add_tensor(const std::string& name, dtype type,
                                       const std::vector<int64_t>& shape,
                                       std::vector<uint8_t> bytes) {
    for (int64_t d : shape) {
        if (d < 0) throw std::invalid_argument("gguf_builder: negative dimension");
    }
    if (bytes.size() != tensor_bytes(type, shape)) {
        throw std::invalid_argument("gguf_builder: tensor '" + name + "' has " +
                                    std::to_string(bytes.size()) + " B, expected " +
                                    std::to_string(tensor_bytes(type, shape)));
    }
    std::vector<uint64_t> dims(shape.begin(), shape.end());
    return add_tensor_raw(name, static_cast<uint32_t>(type), dims, std::move(bytes));
}

gguf_builder& gguf_builder::add_tensor_f32(const std::string& name,
                                           const std::vector<int64_t>& shape,
                                           const std::vector<float>& values) {
    return add_tensor(name, dtype::f32, shape, f32_bytes(values));
}

gguf_builder& gguf_builder::add_tensor_filled(const std::string& name, dtype type,
                                              const std::vector<int64_t>& shape) {
    std::vector<uint8_t> bytes(tensor_bytes(type, shape));
    uint32_t s = 2166136261u;
    for (char c : name) s = (s ^ static_cast<uint8_t>(c)) * 16777619u;
    for (uint8_t& b : bytes) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        b = static_cast<uint8_t>(s);
    }
    return add_tensor(name, type, shape, std::move(bytes));
}

gguf_builder& gguf_builder::add_tensor_raw(const std::string& name, uint32_t type_id,
                                           const std::vector<uint64_t>& dims,
                                           std::vector<uint8_t> bytes,
                                           std::optional<uint64_t> offset) {
    tensors_.push_back({name, type_id, dims, std::move(bytes), offset, offset});
    return *this;
}

gguf_builder::tensor* gguf_builder::find_tensor(const std::string& name) {
    for (tensor& t : tensors_) {
        if (t.name == name) return &t;
    }
    throw std::invalid_argument("gguf_builder: no tensor '" + name + "'");
}

gguf_builder& gguf_builder::set_tensor_offset(const std::string& name, uint64_t offset) {
    find_tensor(name)->info_offset = offset;
    return *this;
}

gguf_builder& gguf_builder::override_magic(uint32_t magic) {
    magic_ = magic;
    return *this;
}

gguf_builder& gguf_builder::override_n_tensors(uint64_t n) {
    n_tensors_ = n;
    return *this;
}

gguf_builder& gguf_builder::override_n_kv(uint64_t n) {
    n_kv_ = n;
    return *this;
}

// ---- output ----

std::vector<uint8_t> gguf_builder::build(gguf_layout* layout) const {
    gguf_layout lay;
    // Data placement first: sequential aligned offsets unless a raw tensor asked for its own.
    std::vector<uint64_t> data_off(tensors_.size());
    uint64_t next = 0, data_size = 0;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const tensor& t = tensors_[i];
        data_off[i] = t.data_offset ? *t.data_offset : next;
        const uint64_t end = align_up(data_off[i] + t.bytes.size(), alignment_);
        if (!t.data_offset) next = end;
        if (end > data_size) data_size = end;
        if (data_size > (uint64_t{1} << 32)) {
            throw std::invalid_argument("gguf_builder: data section over 4 GiB");
        }
    }

    byte_writer w;
    w.u32(magic_ ? *magic_ : k_magic).u32(version_);
    w.u64(n_tensors_ ? *n_tensors_ : tensors_.size());
    w.u64(n_kv_ ? *n_kv_ : kvs_.size());
    for (const kv& e : kvs_) {
        gguf_layout::kv_fields f{};
        f.key_len = w.size();
        w.str(e.key);
        f.type = w.size();
        w.u32(e.type);
        f.value = w.size();
        w.put(e.payload.data(), e.payload.size());
        lay.kvs.push_back(f);
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const tensor& t = tensors_[i];
        gguf_layout::tensor_fields f{};
        f.name_len = w.size();
        w.str(t.name);
        f.n_dims = w.size();
        w.u32(static_cast<uint32_t>(t.dims.size()));
        f.dims = w.size();
        for (uint64_t d : t.dims) w.u64(d);
        f.type = w.size();
        w.u32(t.type_id);
        f.offset = w.size();
        w.u64(t.info_offset ? *t.info_offset : data_off[i]);
        f.nbytes = t.bytes.size();
        lay.tensors.push_back(f);
    }
    lay.infos_end = w.size();
    w.pad_to(alignment_);  // like ggml, even when there are no tensors
    lay.data_start = w.size();

    std::vector<uint8_t> img = w.take();
    img.resize(lay.data_start + data_size, 0);
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const tensor& t = tensors_[i];
        lay.tensors[i].data = lay.data_start + data_off[i];
        if (!t.bytes.empty()) {
            std::memcpy(img.data() + lay.tensors[i].data, t.bytes.data(), t.bytes.size());
        }
    }
    lay.size = img.size();
    if (layout) *layout = std::move(lay);
    return img;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw std::runtime_error("write_file: " + path + ": " + std::strerror(errno));
    const size_t n = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
    const bool closed = std::fclose(f) == 0;
    if (n != bytes.size() || !closed) throw std::runtime_error("write_file: " + path + ": failed");
}

void gguf_builder::write(const std::string& path, gguf_layout* layout) const {
    write_file(path, build(layout));
}

void patch_u32(std::vector<uint8_t>& img, size_t pos, uint32_t v) {
    if (pos + 4 > img.size()) throw std::out_of_range("patch_u32 past end of image");
    std::memcpy(img.data() + pos, &v, 4);
}

void patch_u64(std::vector<uint8_t>& img, size_t pos, uint64_t v) {
    if (pos + 8 > img.size()) throw std::out_of_range("patch_u64 past end of image");
    std::memcpy(img.data() + pos, &v, 8);
}

temp_file::temp_file(const std::string& stem) {
    const char* dir = std::getenv("TMPDIR");
    std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/" + stem + "-XXXXXX";
    const int fd = ::mkstemp(tmpl.data());
    if (fd < 0) throw std::runtime_error("mkstemp: " + tmpl + ": " + std::strerror(errno));
    ::close(fd);
    path_ = tmpl;
}

temp_file::~temp_file() { ::unlink(path_.c_str()); }

}  // namespace cbltest
