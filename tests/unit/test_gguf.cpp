// GGUF reader: round trips through the test writer, and handcrafted corruption (every prefix of a
// valid file, hostile counts and lengths, bad offsets, types and values). Every malformed input
// must end in a cacheblend::error with the right status, never a crash.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cacheblend.h"
#include "core/model/gguf.h"
#include "core/util/error.h"
#include "kernels/dtype.h"
#include "util/fifo-guard.h"
#include "util/gguf-writer.h"
#include "util/test-util.h"

using cacheblend::dtype;
using cacheblend::gguf_file;
using cacheblend::gguf_value_type;
using cacheblend::status;
using cbltest::gguf_builder;
using cbltest::gguf_layout;

namespace {

constexpr uint64_t k_u64_max = std::numeric_limits<uint64_t>::max();

std::unique_ptr<gguf_file> parse(const std::vector<uint8_t>& img) {
    return gguf_file::from_bytes(img.data(), img.size(), "test.gguf");
}

// Parses img and expects a cacheblend::error with status s whose message contains `needle`.
::testing::AssertionResult fails_with(const std::vector<uint8_t>& img, status s,
                                      const std::string& needle = "") {
    try {
        parse(img);
    } catch (const cacheblend::error& e) {
        const std::string msg = e.what();
        if (e.code() != s) {
            return ::testing::AssertionFailure()
                   << "status " << static_cast<int>(e.code()) << " != " << static_cast<int>(s)
                   << ": " << msg;
        }
        if (msg.rfind("gguf: test.gguf: ", 0) != 0) {
            return ::testing::AssertionFailure() << "message lacks the file name: " << msg;
        }
        if (msg.find(needle) == std::string::npos) {
            return ::testing::AssertionFailure() << "'" << needle << "' not in: " << msg;
        }
        return ::testing::AssertionSuccess();
    } catch (const std::exception& e) {
        return ::testing::AssertionFailure() << "wrong exception type: " << e.what();
    }
    return ::testing::AssertionFailure() << "parsed without error";
}

template <typename F>
::testing::AssertionResult getter_fails(F&& f, status s) {
    try {
        f();
    } catch (const cacheblend::error& e) {
        if (e.code() == s) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << "status " << static_cast<int>(e.code()) << ": "
                                             << e.what();
    }
    return ::testing::AssertionFailure() << "no error";
}

// A small but complete file: metadata of several types and three tensors of different dtypes.
gguf_builder small_model() {
    gguf_builder b;
    b.set_str("general.architecture", "llama");
    b.set_u32("llama.block_count", 2);
    b.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    b.set_bool("tokenizer.ggml.add_bos_token", true);
    b.set_arr_str("tokenizer.ggml.tokens", {"<s>", "a", "", "b c"});
    b.set_arr_i32("tokenizer.ggml.token_type", {3, 1, 1, 1});
    b.add_tensor_f32("output_norm.weight", {8}, {1, 2, 3, 4, 5, 6, 7, 8});
    b.add_tensor_filled("blk.0.attn_q.weight", dtype::q4_1, {32, 3});
    b.add_tensor_filled("token_embd.weight", dtype::q8_0, {64, 2});
    return b;
}

std::vector<uint8_t> bytes_of(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
    return v;
}

}  // namespace

// ---------------------------------------------------------------- dtype table

TEST(dtype, table_matches_reference) {
    struct row {
        uint32_t id;
        const char* name;
        int64_t elems;
        size_t bytes;
    };
    const row rows[] = {
        {0, "f32", 1, 4},        {1, "f16", 1, 2},        {2, "q4_0", 32, 18},
        {3, "q4_1", 32, 20},     {6, "q5_0", 32, 22},     {7, "q5_1", 32, 24},
        {8, "q8_0", 32, 34},     {9, "q8_1", 32, 36},     {10, "q2_K", 256, 84},
        {11, "q3_K", 256, 110},  {12, "q4_K", 256, 144},  {13, "q5_K", 256, 176},
        {14, "q6_K", 256, 210},  {15, "q8_K", 256, 292},  {30, "bf16", 1, 2},
    };
    for (const row& r : rows) {
        const cacheblend::dtype_traits* t = cacheblend::dtype_info(r.id);
        ASSERT_NE(t, nullptr) << r.id;
        EXPECT_STREQ(t->name, r.name);
        EXPECT_EQ(t->block_elems, r.elems) << r.name;
        EXPECT_EQ(t->block_bytes, r.bytes) << r.name;
        EXPECT_STREQ(cacheblend::dtype_name(static_cast<dtype>(r.id)), r.name);
    }
    // Removed ids, IQ/integer/f64 types, ids past the table.
    for (uint32_t id : {4u, 5u, 16u, 20u, 23u, 24u, 28u, 29u, 31u, 34u, 39u, 40u, 43u, 1000u,
                        0xffffffffu}) {
        EXPECT_EQ(cacheblend::dtype_info(id), nullptr) << id;
    }
    EXPECT_STREQ(cacheblend::dtype_name(static_cast<dtype>(16)), "unknown");
}

TEST(dtype, row_bytes) {
    EXPECT_EQ(cacheblend::dtype_row_bytes(dtype::f32, 576), 2304u);
    EXPECT_EQ(cacheblend::dtype_row_bytes(dtype::bf16, 10), 20u);
    EXPECT_EQ(cacheblend::dtype_row_bytes(dtype::q4_1, 576), 18u * 20);
    EXPECT_EQ(cacheblend::dtype_row_bytes(dtype::q8_0, 576), 18u * 34);
    EXPECT_EQ(cacheblend::dtype_row_bytes(dtype::q6_k, 512), 2u * 210);
    EXPECT_EQ(cacheblend::dtype_row_bytes(dtype::q4_k, 0), 0u);
}

// ---------------------------------------------------------------- round trips

TEST(gguf, round_trip_scalars) {
    gguf_builder b;
    const std::string bin("\xff\x00z\xc3", 4);  // byte strings: NUL and invalid UTF-8 allowed
    b.set_u8("k.u8", 200).set_i8("k.i8", -100).set_u16("k.u16", 60000).set_i16("k.i16", -30000);
    b.set_u32("k.u32", 4000000000u).set_i32("k.i32", -2000000000);
    b.set_u64("k.u64", uint64_t{1} << 62).set_i64("k.i64", std::numeric_limits<int64_t>::min());
    b.set_f32("k.f32", 0.25f).set_f64("k.f64", -1.0e300);
    b.set_bool("k.true", true).set_bool("k.false", false);
    b.set_str("k.str", "hello").set_str("k.empty", "").set_str("k.bin", bin);
    auto f = parse(b.build());

    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(f->keys().size(), 15u);
    EXPECT_EQ(f->keys().front(), "k.u8");
    EXPECT_EQ(f->keys().back(), "k.bin");
    EXPECT_TRUE(f->tensors().empty());

    EXPECT_EQ(*f->get_int("k.u8"), 200);
    EXPECT_EQ(*f->get_int("k.i8"), -100);
    EXPECT_EQ(*f->get_int("k.u16"), 60000);
    EXPECT_EQ(*f->get_int("k.i16"), -30000);
    EXPECT_EQ(*f->get_int("k.u32"), 4000000000LL);
    EXPECT_EQ(*f->get_int("k.i32"), -2000000000);
    EXPECT_EQ(*f->get_int("k.u64"), int64_t{1} << 62);
    EXPECT_EQ(*f->get_int("k.i64"), std::numeric_limits<int64_t>::min());
    EXPECT_EQ(*f->get_float("k.f32"), 0.25);
    EXPECT_EQ(*f->get_float("k.f64"), -1.0e300);
    EXPECT_EQ(*f->get_bool("k.true"), true);
    EXPECT_EQ(*f->get_bool("k.false"), false);
    EXPECT_EQ(*f->get_string("k.str"), "hello");
    EXPECT_EQ(*f->get_string("k.empty"), "");
    EXPECT_EQ(*f->get_string("k.bin"), bin);

    EXPECT_EQ(*f->type_of("k.u8"), gguf_value_type::u8);
    EXPECT_EQ(*f->type_of("k.i64"), gguf_value_type::i64);
    EXPECT_EQ(*f->type_of("k.f64"), gguf_value_type::f64);
    EXPECT_EQ(*f->type_of("k.true"), gguf_value_type::boolean);
    EXPECT_EQ(*f->type_of("k.str"), gguf_value_type::string);
    EXPECT_TRUE(f->has("k.u32"));
    EXPECT_FALSE(f->has("k.missing"));
    EXPECT_FALSE(f->type_of("k.missing"));
    EXPECT_FALSE(f->get_int("k.missing"));
    EXPECT_FALSE(f->get_float("k.missing"));
    EXPECT_FALSE(f->get_bool("k.missing"));
    EXPECT_FALSE(f->get_string("k.missing"));
    EXPECT_FALSE(f->get_string_array("k.missing"));
    EXPECT_FALSE(f->get_string_array_view("k.missing"));
    EXPECT_FALSE(f->get_int_array("k.missing"));
    EXPECT_FALSE(f->get_float_array("k.missing"));
    EXPECT_FALSE(f->array_info("k.missing"));
    EXPECT_STREQ(cacheblend::gguf_type_name(gguf_value_type::boolean), "bool");
}

TEST(gguf, round_trip_arrays) {
    const std::string bin("a\0b", 3);
    gguf_builder b;
    b.set_arr_str("a.str", {"x", "", bin, std::string(300, 'q')});
    b.set_arr_u8("a.u8", {0, 255}).set_arr_i8("a.i8", {-128, 127});
    b.set_arr_u16("a.u16", {65535}).set_arr_i16("a.i16", {-32768});
    b.set_arr_u32("a.u32", {4294967295u, 1}).set_arr_i32("a.i32", {-1, 2, -3});
    b.set_arr_u64("a.u64", {uint64_t{1} << 63}).set_arr_i64("a.i64", {-(int64_t{1} << 40)});
    b.set_arr_f32("a.f32", {1.5f, -2.0f}).set_arr_f64("a.f64", {0.125, 1e10});
    b.set_arr_bool("a.bool", {true, false, true});
    b.set_arr_i32("a.empty", {});
    b.set_arr_str("a.empty_str", {});
    // Array of arrays of i32: legal to parse, rejected by the flat getters.
    cbltest::byte_writer nested;
    nested.u32(static_cast<uint32_t>(gguf_value_type::array)).u64(2);
    nested.u32(static_cast<uint32_t>(gguf_value_type::i32)).u64(2).i32(1).i32(2);
    nested.u32(static_cast<uint32_t>(gguf_value_type::i32)).u64(0);
    b.set_raw("a.nested", static_cast<uint32_t>(gguf_value_type::array), nested.take());
    auto f = parse(b.build());

    const std::vector<std::string> strs = {"x", "", bin, std::string(300, 'q')};
    EXPECT_EQ(*f->get_string_array("a.str"), strs);
    const auto views = *f->get_string_array_view("a.str");
    ASSERT_EQ(views.size(), 4u);
    EXPECT_EQ(views[2], bin);
    EXPECT_EQ(*f->get_int_array("a.u8"), (std::vector<int64_t>{0, 255}));
    EXPECT_EQ(*f->get_int_array("a.i8"), (std::vector<int64_t>{-128, 127}));
    EXPECT_EQ(*f->get_int_array("a.u16"), (std::vector<int64_t>{65535}));
    EXPECT_EQ(*f->get_int_array("a.i16"), (std::vector<int64_t>{-32768}));
    EXPECT_EQ(*f->get_int_array("a.u32"), (std::vector<int64_t>{4294967295LL, 1}));
    EXPECT_EQ(*f->get_int_array("a.i32"), (std::vector<int64_t>{-1, 2, -3}));
    EXPECT_EQ(*f->get_int_array("a.i64"), (std::vector<int64_t>{-(int64_t{1} << 40)}));
    EXPECT_TRUE(getter_fails([&] { f->get_int_array("a.u64"); }, status::format));  // > INT64_MAX
    EXPECT_EQ(*f->get_float_array("a.f32"), (std::vector<float>{1.5f, -2.0f}));
    EXPECT_EQ(*f->get_float_array("a.f64"), (std::vector<float>{0.125f, 1e10f}));
    EXPECT_TRUE(f->get_int_array("a.empty")->empty());
    EXPECT_TRUE(f->get_string_array("a.empty_str")->empty());

    auto info = f->array_info("a.bool");
    ASSERT_TRUE(info);
    EXPECT_EQ(info->elem_type, gguf_value_type::boolean);
    EXPECT_EQ(info->count, 3u);
    EXPECT_EQ(f->array_info("a.str")->count, 4u);
    EXPECT_EQ(f->array_info("a.nested")->elem_type, gguf_value_type::array);
    EXPECT_EQ(f->array_info("a.nested")->count, 2u);
    EXPECT_TRUE(getter_fails([&] { f->get_int_array("a.nested"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_string_array("a.nested"); }, status::format));
}

TEST(gguf, getter_type_mismatch_is_format_error) {
    gguf_builder b;
    b.set_u32("u32", 7).set_str("str", "s").set_f32("f32", 1).set_bool("bool", true);
    b.set_u8("u8", 1).set_u64("big", k_u64_max);
    b.set_arr_i32("ints", {1}).set_arr_str("strs", {"a"}).set_arr_f32("floats", {1});
    auto f = parse(b.build());
    EXPECT_TRUE(getter_fails([&] { f->get_string("u32"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_string("strs"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_int("str"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_int("f32"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_int("bool"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_int("ints"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_int("big"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_float("u32"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_bool("u8"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_string_array("ints"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_string_array_view("str"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_int_array("strs"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_int_array("u32"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_int_array("floats"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->get_float_array("ints"); }, status::format));
    EXPECT_TRUE(getter_fails([&] { f->array_info("u32"); }, status::format));
    try {
        f->get_string("u32");
    } catch (const cacheblend::error& e) {
        EXPECT_NE(std::string(e.what()).find("'u32' has type u32, expected string"),
                  std::string::npos)
            << e.what();
    }
}

TEST(gguf, round_trip_tensors) {
    gguf_builder b;
    const std::vector<float> norm = {1, -2, 3.5f, 4, 5, 6, 7, 8, 9, 10};
    b.add_tensor_f32("norm", {10}, norm);
    const auto q41 = bytes_of(cbltest::tensor_bytes(dtype::q4_1, {64, 3}), 1);
    b.add_tensor("q41", dtype::q4_1, {64, 3}, q41);
    const auto q80 = bytes_of(cbltest::tensor_bytes(dtype::q8_0, {32, 2, 2}), 2);
    b.add_tensor("q80", dtype::q8_0, {32, 2, 2}, q80);
    const auto q4k = bytes_of(cbltest::tensor_bytes(dtype::q4_k, {256, 1, 1, 2}), 3);
    b.add_tensor("q4k", dtype::q4_k, {256, 1, 1, 2}, q4k);
    b.add_tensor("bf16", dtype::bf16, {3}, bytes_of(6, 4));
    b.add_tensor("f16", dtype::f16, {5, 0}, {});  // empty tensor
    b.add_tensor("q6k", dtype::q6_k, {512}, bytes_of(420, 5));
    gguf_layout lay;
    const auto img = b.build(&lay);
    auto f = parse(img);

    ASSERT_EQ(f->tensors().size(), 7u);
    EXPECT_EQ(f->data_offset(), lay.data_start);
    EXPECT_EQ(f->data_offset() % 32, 0u);
    const auto* t = f->find_tensor("norm");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, dtype::f32);
    EXPECT_EQ(t->n_dims, 1u);
    EXPECT_EQ(t->ne[0], 10);
    EXPECT_EQ(t->ne[1], 1);
    EXPECT_EQ(t->nbytes, 40u);
    EXPECT_EQ(t->n_elements(), 10);
    EXPECT_EQ(std::memcmp(t->data, norm.data(), 40), 0);

    t = f->find_tensor("q41");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, dtype::q4_1);
    EXPECT_EQ(t->n_dims, 2u);
    EXPECT_EQ(t->ne[1], 3);
    EXPECT_EQ(t->nbytes, q41.size());
    EXPECT_EQ(std::memcmp(t->data, q41.data(), q41.size()), 0);

    t = f->find_tensor("q4k");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->n_dims, 4u);
    EXPECT_EQ(t->ne[3], 2);
    EXPECT_EQ(t->n_elements(), 512);
    EXPECT_EQ(std::memcmp(t->data, q4k.data(), q4k.size()), 0);

    t = f->find_tensor("f16");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->nbytes, 0u);
    EXPECT_EQ(t->n_elements(), 0);

    EXPECT_EQ(std::memcmp(f->find_tensor("q80")->data, q80.data(), q80.size()), 0);
    EXPECT_EQ(f->find_tensor("bf16")->type, dtype::bf16);
    EXPECT_EQ(f->find_tensor("q6k")->nbytes, 420u);
    EXPECT_EQ(f->find_tensor("missing"), nullptr);
    for (size_t i = 0; i < f->tensors().size(); ++i) {
        const auto& ti = f->tensors()[i];
        EXPECT_EQ(ti.offset % 32, 0u) << ti.name;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(ti.data) % 32, 0u) << ti.name;
        EXPECT_EQ(ti.offset + f->data_offset(), lay.tensors[i].data) << ti.name;
    }
}

TEST(gguf, alignment_and_version) {
    for (uint32_t a : {1u, 8u, 64u, 4096u}) {
        gguf_builder b = small_model();
        b.set_alignment(a);
        auto f = parse(b.build());
        EXPECT_EQ(f->alignment(), a);
        EXPECT_EQ(f->data_offset() % a, 0u);
        for (const auto& t : f->tensors()) EXPECT_EQ(t.offset % a, 0u);
    }
    gguf_builder b = small_model();
    b.set_version(2);
    EXPECT_EQ(parse(b.build())->version(), 2u);
    // Other integer types are accepted for general.alignment.
    b.set_u64("general.alignment", 32);
    EXPECT_EQ(parse(b.build())->alignment(), 32u);
}

TEST(gguf, no_tensors_padding_optional) {
    gguf_builder b;
    b.set_str("general.architecture", "llama");
    gguf_layout lay;
    auto img = b.build(&lay);
    EXPECT_EQ(parse(img)->data_offset(), lay.data_start);
    img.resize(lay.infos_end);  // a metadata-only file need not be padded
    EXPECT_EQ(*parse(img)->get_string("general.architecture"), "llama");
}

TEST(gguf, open_file_matches_from_bytes) {
    cbltest::temp_file tmp("gguf");
    gguf_builder b = small_model();
    gguf_layout lay;
    b.write(tmp.path(), &lay);
    auto f = gguf_file::open(tmp.path());
    auto g = parse(b.build());
    EXPECT_EQ(f->path(), tmp.path());
    EXPECT_EQ(f->file_size(), lay.size);
    EXPECT_EQ(f->keys(), g->keys());
    EXPECT_EQ(*f->get_string_array("tokenizer.ggml.tokens"),
              (std::vector<std::string>{"<s>", "a", "", "b c"}));
    EXPECT_EQ(*f->get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{3, 1, 1, 1}));
    EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("llama.attention.layer_norm_rms_epsilon")),
                    1e-5f);
    ASSERT_EQ(f->tensors().size(), g->tensors().size());
    for (size_t i = 0; i < f->tensors().size(); ++i) {
        const auto& a = f->tensors()[i];
        const auto& c = g->tensors()[i];
        EXPECT_EQ(a.name, c.name);
        EXPECT_EQ(a.offset, c.offset);
        EXPECT_EQ(a.nbytes, c.nbytes);
        EXPECT_EQ(std::memcmp(a.data, c.data, a.nbytes), 0);
    }
    EXPECT_EQ(f->content_hash(), g->content_hash());
}

TEST(gguf, content_hash) {
    gguf_builder b = small_model();
    b.add_tensor_filled("big", dtype::f32, {8192, 4});  // 128 KiB: sampled, not hashed whole
    gguf_layout lay;
    const auto img = b.build(&lay);
    const uint64_t h = parse(img)->content_hash();
    EXPECT_EQ(parse(img)->content_hash(), h);

    auto changed = [&](size_t pos) {
        auto copy = img;
        copy[pos] ^= 0x40;
        return parse(copy)->content_hash() != h;
    };
    const auto& big = lay.tensors.back();
    EXPECT_TRUE(changed(lay.tensors[0].data));                    // small tensor
    EXPECT_TRUE(changed(lay.tensors[2].data + 10));
    EXPECT_TRUE(changed(big.data));                               // head of a big tensor
    EXPECT_TRUE(changed(big.data + big.nbytes - 1));              // tail
    EXPECT_TRUE(changed(lay.kvs[0].value + 8));                   // metadata
    b.set_u32("llama.block_count", 3);
    EXPECT_NE(parse(b.build())->content_hash(), h);
}

// ---------------------------------------------------------------- truncation

TEST(gguf, truncation_at_every_offset) {
    gguf_layout lay;
    const auto img = small_model().build(&lay);
    const auto& last = lay.tensors.back();
    const size_t end = last.data + last.nbytes;  // tail padding after this is optional
    ASSERT_LE(end, img.size());
    for (size_t n = 0; n < end; ++n) {
        std::vector<uint8_t> cut(img.begin(), img.begin() + static_cast<std::ptrdiff_t>(n));
        EXPECT_TRUE(fails_with(cut, status::corrupt)) << "prefix " << n;
    }
    for (size_t n = end; n <= img.size(); ++n) {
        std::vector<uint8_t> cut(img.begin(), img.begin() + static_cast<std::ptrdiff_t>(n));
        EXPECT_NO_THROW(parse(cut)) << "prefix " << n;
    }
}

TEST(gguf, truncated_and_empty_files_on_disk) {
    cbltest::temp_file tmp("gguf");
    auto img = small_model().build();
    img.resize(img.size() / 2);
    cbltest::write_file(tmp.path(), img);
    try {
        gguf_file::open(tmp.path());
        ADD_FAILURE() << "opened a truncated file";
    } catch (const cacheblend::error& e) {
        EXPECT_EQ(e.code(), status::corrupt);
        EXPECT_NE(std::string(e.what()).find(tmp.path()), std::string::npos) << e.what();
    }
    cbltest::write_file(tmp.path(), {});
    try {
        gguf_file::open(tmp.path());
        ADD_FAILURE() << "opened an empty file";
    } catch (const cacheblend::error& e) {
        EXPECT_EQ(e.code(), status::corrupt) << e.what();
    }
}

TEST(gguf, io_errors) {
    try {
        gguf_file::open("/nonexistent/dir/model.gguf");
        ADD_FAILURE() << "opened a missing file";
    } catch (const cacheblend::error& e) {
        EXPECT_EQ(e.code(), status::io);
        const std::string msg = e.what();
        EXPECT_NE(msg.find("/nonexistent/dir/model.gguf"), std::string::npos) << msg;
        EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
    }
    try {
        gguf_file::open("/tmp");
        ADD_FAILURE() << "opened a directory";
    } catch (const cacheblend::error& e) {
        EXPECT_EQ(e.code(), status::io) << e.what();
    }
}

// Issue 17: a FIFO given as the model hung forever (open for reading waits for a writer). It is
// refused now as not a regular file, naming the path, without waiting.
TEST(gguf, fifo_is_refused_without_hanging) {
    char tmpl[] = "/tmp/cbl-gguf-fifo-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const std::string fifo = std::string(tmpl) + "/model.gguf";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_TRUE(cbltest::returns_soon(fifo, [&] {
        try {
            gguf_file::open(fifo);
            ADD_FAILURE() << "opened a FIFO";
        } catch (const cacheblend::error& e) {
            EXPECT_EQ(e.code(), status::io) << e.what();
            const std::string msg = e.what();
            EXPECT_NE(msg.find(fifo), std::string::npos) << msg;
            EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
        }
    }));
    ::unlink(fifo.c_str());
    ::rmdir(tmpl);
}

// ---------------------------------------------------------------- header

TEST(gguf, bad_magic) {
    gguf_builder b = small_model();
    b.override_magic(0x46554746);  // "FGUF"
    EXPECT_TRUE(fails_with(b.build(), status::format, "bad magic"));
    EXPECT_TRUE(fails_with({'G', 'G', 'U', 'F'}, status::corrupt, "version"));
    EXPECT_TRUE(fails_with({'P', 'K', 3, 4, 0, 0, 0, 0}, status::format, "magic"));
}

TEST(gguf, unsupported_versions) {
    for (uint32_t v : {0u, 1u, 4u, 0xffffffffu, 0x03000000u}) {
        gguf_builder b = small_model();
        b.set_version(v);
        EXPECT_TRUE(fails_with(b.build(), status::format, "")) << v;
    }
    gguf_builder b = small_model();
    b.set_version(1);
    EXPECT_TRUE(fails_with(b.build(), status::format, "v1"));
    b.set_version(0x03000000u);
    EXPECT_TRUE(fails_with(b.build(), status::format, "big-endian"));
}

TEST(gguf, hostile_counts) {
    const uint64_t hostile[] = {k_u64_max, k_u64_max - 1, uint64_t{1} << 63, uint64_t{1} << 32,
                                1000000};
    for (uint64_t n : hostile) {
        gguf_builder b = small_model();
        b.override_n_tensors(n);
        EXPECT_TRUE(fails_with(b.build(), status::corrupt, "cannot fit")) << n;
        gguf_builder c = small_model();
        c.override_n_kv(n);
        EXPECT_TRUE(fails_with(c.build(), status::corrupt, "cannot fit")) << n;
    }
    // Off by one: counts that fit the size cap but not the content.
    for (int delta : {1, 2}) {
        gguf_builder b = small_model();
        b.override_n_kv(6 + delta);
        EXPECT_THROW(parse(b.build()), cacheblend::error);
        gguf_builder c = small_model();
        c.override_n_tensors(3 + delta);
        EXPECT_THROW(parse(c.build()), cacheblend::error);
    }
    gguf_builder b = small_model();
    b.override_n_kv(5);  // the 6th KV is then read as a tensor info
    EXPECT_THROW(parse(b.build()), cacheblend::error);
}

TEST(gguf, hostile_lengths) {
    gguf_layout lay;
    const auto img = small_model().build(&lay);
    const uint64_t lens[] = {k_u64_max, k_u64_max - 7, uint64_t{1} << 63, img.size()};
    for (uint64_t len : lens) {
        auto key = img;
        cbltest::patch_u64(key, lay.kvs[1].key_len, len);
        EXPECT_TRUE(fails_with(key, status::corrupt, "length")) << len;

        auto str = img;  // general.architecture's string value
        cbltest::patch_u64(str, lay.kvs[0].value, len);
        EXPECT_TRUE(fails_with(str, status::corrupt, "general.architecture")) << len;

        auto arr = img;  // tokenizer.ggml.tokens: element count, then first element's length
        cbltest::patch_u64(arr, lay.kvs[4].value + 4, len);
        EXPECT_TRUE(fails_with(arr, status::corrupt, "tokenizer.ggml.tokens")) << len;
        auto elem = img;
        cbltest::patch_u64(elem, lay.kvs[4].value + 12, len);
        EXPECT_TRUE(fails_with(elem, status::corrupt, "tokenizer.ggml.tokens")) << len;

        auto ints = img;  // tokenizer.ggml.token_type count
        cbltest::patch_u64(ints, lay.kvs[5].value + 4, len);
        EXPECT_TRUE(fails_with(ints, status::corrupt, "token_type")) << len;

        auto name = img;
        cbltest::patch_u64(name, lay.tensors[1].name_len, len);
        EXPECT_TRUE(fails_with(name, status::corrupt, "tensor name")) << len;
    }
}

// ---------------------------------------------------------------- tensor infos

TEST(gguf, tensor_offsets) {
    {  // exact overlap
        gguf_builder b = small_model();
        b.set_tensor_offset("token_embd.weight", 0);
        EXPECT_TRUE(fails_with(b.build(), status::corrupt, "overlaps"));
    }
    {  // partial overlap: q4_1 [32, 3] is 60 B at [32, 92); put the next one at 64
        gguf_builder b = small_model();
        b.set_tensor_offset("token_embd.weight", 64);
        EXPECT_TRUE(fails_with(b.build(), status::corrupt, "overlaps"));
    }
    {  // reordered but disjoint offsets are fine
        gguf_builder b;
        b.add_tensor_raw("b", 0, {8}, bytes_of(32, 1), 32);
        b.add_tensor_raw("a", 0, {8}, bytes_of(32, 2), 0);
        auto f = parse(b.build());
        EXPECT_EQ(f->find_tensor("a")->offset, 0u);
        EXPECT_EQ(f->find_tensor("b")->data[0], 1);
    }
    for (uint64_t off : {uint64_t{1} << 40, k_u64_max - 31, uint64_t{4096}}) {
        gguf_builder b = small_model();
        b.set_tensor_offset("blk.0.attn_q.weight", off);
        EXPECT_TRUE(fails_with(b.build(), status::corrupt, "blk.0.attn_q.weight")) << off;
    }
    {  // misaligned
        gguf_builder b = small_model();
        b.set_tensor_offset("token_embd.weight", 132);
        EXPECT_TRUE(fails_with(b.build(), status::corrupt, "alignment"));
    }
}

TEST(gguf, past_eof_message_names_file_tensor_and_extent) {
    cbltest::temp_file tmp("gguf");
    gguf_builder b = small_model();
    gguf_layout lay;
    b.set_tensor_offset("blk.0.attn_q.weight", 4096);
    b.write(tmp.path(), &lay);
    try {
        gguf_file::open(tmp.path());
        ADD_FAILURE() << "no error";
    } catch (const cacheblend::error& e) {
        EXPECT_EQ(e.code(), status::corrupt);
        const std::string expect =
            "gguf: " + tmp.path() + ": tensor 'blk.0.attn_q.weight' data [" +
            std::to_string(lay.data_start + 4096) + ", " +
            std::to_string(lay.data_start + 4096 + 60) + ") extends past end of file (" +
            std::to_string(lay.size) + " B)";
        EXPECT_EQ(e.what(), expect);
    }
}

// A type ggml has (IQ, integer, f64, ternary, fp4 and removed ids) but we do not: UNSUPPORTED,
// naming the tensor, ggml's name for the type and what a model may use instead. An id ggml never
// had: FORMAT.
TEST(gguf, unknown_tensor_type) {
    const std::string supported =
        "weights must be one of: f32 f16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K bf16";
    const std::pair<uint32_t, const char*> known[] = {
        {4, "q4_2 (removed from ggml)"}, {16, "iq2_xxs"}, {20, "iq4_nl"}, {23, "iq4_xs"},
        {24, "i8"}, {28, "f64"}, {29, "iq1_m"}, {31, "q4_0_4_4 (removed from GGUF files)"},
        {34, "tq1_0"}, {39, "mxfp4"}, {40, "nvfp4"}, {41, "q1_0"},
    };
    for (const auto& [id, name] : known) {
        gguf_builder b;
        b.add_tensor_filled("a", dtype::f32, {8});
        b.add_tensor_raw("blk.0.attn_q.weight", id, {32}, bytes_of(64, 0));
        gguf_layout lay;
        const auto img = b.build(&lay);
        const std::string expect = "gguf: test.gguf: tensor 'blk.0.attn_q.weight': ggml type " +
                                   std::string(name) + " (id " + std::to_string(id) +
                                   ", at offset " + std::to_string(lay.tensors[1].type) +
                                   ") is not supported; " + supported;
        try {
            parse(img);
            ADD_FAILURE() << "type " << id << " accepted";
        } catch (const cacheblend::error& e) {
            EXPECT_EQ(e.code(), status::unsupported) << id;
            EXPECT_EQ(e.what(), expect);
        }
    }
    for (uint32_t id : {42u, 43u, 64u, 1000u, 0xffffffffu}) {
        gguf_builder b;
        b.add_tensor_raw("t", id, {32}, bytes_of(64, 0));
        gguf_layout lay;
        const auto img = b.build(&lay);
        EXPECT_TRUE(fails_with(img, status::format,
                               "tensor 't': unknown ggml type id " + std::to_string(id) +
                                   " at offset " + std::to_string(lay.tensors[0].type) +
                                   " (not a ggml type: a newer GGUF or a corrupt file)"))
            << id;
    }
}

// The same through model loading and the C API: a small but complete llama model whose attn_q is
// IQ2_XXS is refused with CBL_UNSUPPORTED and a message naming the file, tensor and type; one
// whose attn_q is Q8_K (a ggml type we have, but only for activations) likewise.
namespace {

gguf_builder tiny_llama(uint32_t attn_q_type) {
    const int64_t n_embd = 256, n_ff = 256, n_vocab = 5;
    gguf_builder b;
    b.set_str("general.architecture", "llama");
    b.set_u32("llama.context_length", 64);
    b.set_u32("llama.embedding_length", static_cast<uint32_t>(n_embd));
    b.set_u32("llama.block_count", 1);
    b.set_u32("llama.feed_forward_length", static_cast<uint32_t>(n_ff));
    b.set_u32("llama.attention.head_count", 4);
    b.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    b.set_str("tokenizer.ggml.model", "llama");
    b.set_arr_str("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "b"});
    b.set_arr_i32("tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
    b.set_arr_f32("tokenizer.ggml.scores", {0, 0, 0, -1, -2});
    b.add_tensor_filled("token_embd.weight", dtype::q8_0, {n_embd, n_vocab});
    b.add_tensor_f32("output_norm.weight", {n_embd}, std::vector<float>(n_embd, 1.f));
    b.add_tensor_f32("blk.0.attn_norm.weight", {n_embd}, std::vector<float>(n_embd, 1.f));
    const std::vector<int64_t> sq = {n_embd, n_embd};
    const auto q_dtype = cacheblend::dtype_info(attn_q_type);
    if (q_dtype) {
        b.add_tensor_filled("blk.0.attn_q.weight", static_cast<dtype>(attn_q_type), sq);
    } else {
        b.add_tensor_raw("blk.0.attn_q.weight", attn_q_type, {256, 256}, bytes_of(256 * 66, 7));
    }
    b.add_tensor_filled("blk.0.attn_k.weight", dtype::q8_0, sq);
    b.add_tensor_filled("blk.0.attn_v.weight", dtype::q8_0, sq);
    b.add_tensor_filled("blk.0.attn_output.weight", dtype::q8_0, sq);
    b.add_tensor_f32("blk.0.ffn_norm.weight", {n_embd}, std::vector<float>(n_embd, 1.f));
    b.add_tensor_filled("blk.0.ffn_gate.weight", dtype::q8_0, {n_embd, n_ff});
    b.add_tensor_filled("blk.0.ffn_up.weight", dtype::q8_0, {n_embd, n_ff});
    b.add_tensor_filled("blk.0.ffn_down.weight", dtype::q8_0, {n_ff, n_embd});
    return b;
}

}  // namespace

TEST(gguf, model_with_unsupported_tensor_type_is_refused) {
    cbltest::temp_file tmp("gguf");
    // The control: the same model with a Q8_0 attn_q loads.
    tiny_llama(static_cast<uint32_t>(dtype::q8_0)).write(tmp.path());
    cbl_model* m = nullptr;
    ASSERT_EQ(cbl_model_load(tmp.path().c_str(), nullptr, &m), CBL_OK) << cbl_last_error();
    cbl_model_free(m);

    tiny_llama(16).write(tmp.path());  // IQ2_XXS
    m = reinterpret_cast<cbl_model*>(&tmp);
    EXPECT_EQ(cbl_model_load(tmp.path().c_str(), nullptr, &m), CBL_UNSUPPORTED);
    EXPECT_EQ(m, nullptr);
    std::string msg = cbl_last_error();
    EXPECT_EQ(msg.rfind("cbl_model_load: gguf: " + tmp.path() + ": tensor 'blk.0.attn_q.weight': ggml type iq2_xxs "
                        "(id 16, at offset ", 0), 0u) << msg;
    EXPECT_NE(msg.find(") is not supported; weights must be one of: f32 f16 q4_0"), std::string::npos)
        << msg;

    tiny_llama(static_cast<uint32_t>(dtype::q8_k)).write(tmp.path());
    EXPECT_EQ(cbl_model_load(tmp.path().c_str(), nullptr, &m), CBL_UNSUPPORTED);
    EXPECT_EQ(m, nullptr);
    msg = cbl_last_error();
    EXPECT_EQ(msg, "cbl_model_load: model: " + tmp.path() + ": tensor 'blk.0.attn_q.weight' has activation-only type q8_K");
}

TEST(gguf, tensor_shapes) {
    auto raw = [](uint32_t type, std::vector<uint64_t> dims, size_t n) {
        gguf_builder b;
        b.add_tensor_raw("t", type, dims, bytes_of(n, 0));
        return b.build();
    };
    EXPECT_TRUE(fails_with(raw(0, {1, 1, 1, 1, 1}, 4), status::corrupt, "n_dims"));
    {
        gguf_layout lay;
        gguf_builder b;
        b.add_tensor_raw("t", 0, {1}, bytes_of(4, 0));
        auto img = b.build(&lay);
        cbltest::patch_u32(img, lay.tensors[0].n_dims, 0xffffffffu);
        EXPECT_TRUE(fails_with(img, status::corrupt, "n_dims"));
    }
    EXPECT_TRUE(fails_with(raw(0, {static_cast<uint64_t>(-4)}, 16), status::corrupt, "negative"));
    EXPECT_TRUE(fails_with(raw(0, {4, k_u64_max}, 16), status::corrupt, "negative"));
    // Element count overflows int64.
    EXPECT_TRUE(fails_with(raw(0, {uint64_t{1} << 32, uint64_t{1} << 32}, 16), status::corrupt,
                           "overflow"));
    EXPECT_TRUE(fails_with(raw(0, {3, 1, uint64_t{1} << 62}, 16), status::corrupt, "overflow"));
    // Element count fits, byte size does not.
    EXPECT_TRUE(fails_with(raw(0, {uint64_t{1} << 62}, 16), status::corrupt, "overflow"));
    // Block size.
    EXPECT_TRUE(fails_with(raw(2, {33}, 18), status::corrupt, "block size"));
    EXPECT_TRUE(fails_with(raw(12, {32}, 144), status::corrupt, "block size"));
    // Huge but representable: fails the bounds check instead.
    EXPECT_TRUE(fails_with(raw(0, {uint64_t{1} << 40}, 16), status::corrupt, "end of file"));
    // Legal edge cases: scalar (n_dims 0) and zero-element tensors.
    auto f = parse(raw(0, {}, 4));
    EXPECT_EQ(f->tensors()[0].n_elements(), 1);
    EXPECT_EQ(f->tensors()[0].nbytes, 4u);
    f = parse(raw(0, {0, 7}, 0));
    EXPECT_EQ(f->tensors()[0].nbytes, 0u);
}

TEST(gguf, duplicates_and_empty_names) {
    {
        gguf_builder b = small_model();
        cbltest::byte_writer v;
        v.u32(3);
        b.append_raw("llama.block_count", static_cast<uint32_t>(gguf_value_type::u32), v.take());
        EXPECT_TRUE(fails_with(b.build(), status::corrupt, "duplicate key"));
    }
    {
        gguf_builder b = small_model();
        b.add_tensor_filled("output_norm.weight", dtype::f32, {8});
        EXPECT_TRUE(fails_with(b.build(), status::corrupt, "duplicate tensor name"));
    }
    {
        gguf_builder b = small_model();
        b.set_u32("", 1);
        EXPECT_TRUE(fails_with(b.build(), status::corrupt, "empty key"));
    }
    {
        gguf_builder b = small_model();
        b.add_tensor_filled("", dtype::f32, {8});
        EXPECT_TRUE(fails_with(b.build(), status::corrupt, "empty tensor name"));
    }
}

// ---------------------------------------------------------------- metadata values

TEST(gguf, bad_alignment) {
    for (uint32_t a : {0u, 3u, 48u, 0x80000000u, 0xffffffffu}) {
        gguf_builder b = small_model();
        b.set_u32("general.alignment", a);
        EXPECT_TRUE(fails_with(b.build(), status::corrupt, "general.alignment")) << a;
    }
    gguf_builder b = small_model();
    b.set_i32("general.alignment", -32);
    EXPECT_TRUE(fails_with(b.build(), status::corrupt, "general.alignment -32"));
    b.set_u64("general.alignment", k_u64_max);
    EXPECT_TRUE(fails_with(b.build(), status::corrupt, "general.alignment"));
    b.set_str("general.alignment", "32");
    EXPECT_TRUE(fails_with(b.build(), status::format, "general.alignment"));
    b.set_f32("general.alignment", 32.0f);
    EXPECT_TRUE(fails_with(b.build(), status::format, "general.alignment"));
}

TEST(gguf, bad_bool) {
    gguf_builder b = small_model();
    b.set_raw("k.bool", static_cast<uint32_t>(gguf_value_type::boolean), {2});
    EXPECT_TRUE(fails_with(b.build(), status::corrupt, "bool"));
    gguf_builder c = small_model();
    cbltest::byte_writer arr;
    arr.u32(static_cast<uint32_t>(gguf_value_type::boolean)).u64(3).u8(1).u8(0).u8(0xff);
    c.set_raw("k.bools", static_cast<uint32_t>(gguf_value_type::array), arr.take());
    EXPECT_TRUE(fails_with(c.build(), status::corrupt, "bool"));
}

TEST(gguf, unknown_value_types) {
    for (uint32_t t : {13u, 100u, 0xffffffffu}) {
        gguf_builder b = small_model();
        b.set_raw("k.x", t, {0, 0, 0, 0});
        EXPECT_TRUE(fails_with(b.build(), status::format, "unknown value type")) << t;
        gguf_builder c = small_model();
        cbltest::byte_writer arr;
        arr.u32(t).u64(1).u32(0);
        c.set_raw("k.arr", static_cast<uint32_t>(gguf_value_type::array), arr.take());
        EXPECT_TRUE(fails_with(c.build(), status::format, "unknown element type")) << t;
    }
}

TEST(gguf, nested_arrays) {
    auto nest = [](int depth) {
        // depth arrays of arrays around an empty i32 array.
        cbltest::byte_writer w;
        for (int i = 0; i < depth; ++i) w.u32(static_cast<uint32_t>(gguf_value_type::array)).u64(1);
        w.u32(static_cast<uint32_t>(gguf_value_type::i32)).u64(0);
        gguf_builder b;
        b.set_raw("k.nest", static_cast<uint32_t>(gguf_value_type::array), w.take());
        return b.build();
    };
    EXPECT_NO_THROW(parse(nest(3)));
    EXPECT_TRUE(fails_with(nest(100), status::corrupt, "nests deeper"));
    // A hostile element count of nested arrays is capped before looping.
    cbltest::byte_writer w;
    w.u32(static_cast<uint32_t>(gguf_value_type::array)).u64(uint64_t{1} << 60);
    gguf_builder b;
    b.set_raw("k.nest", static_cast<uint32_t>(gguf_value_type::array), w.take());
    EXPECT_TRUE(fails_with(b.build(), status::corrupt, "elements"));
}

// ---------------------------------------------------------------- mutation smoke test

// Deterministic random corruption of a valid image: every outcome must be success or a
// cacheblend::error (run under ASan/UBSan to catch overreads). The libFuzzer target in
// tests/fuzz/fuzz_gguf.cpp does the same at scale.
TEST(gguf, random_mutations_never_crash) {
    gguf_layout lay;
    const auto img = small_model().build(&lay);
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    auto rnd = [&] {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    };
    const uint64_t specials[] = {0, 1, 31, 32, 255, 0x7fffffffffffffffULL, 0x8000000000000000ULL,
                                 k_u64_max, img.size(), img.size() - lay.data_start};
    int ok = 0, errors = 0;
    for (int iter = 0; iter < 4000; ++iter) {
        auto m = img;
        const int n_edits = 1 + static_cast<int>(rnd() % 4);
        for (int k = 0; k < n_edits; ++k) {
            const size_t pos = rnd() % m.size();
            switch (rnd() % 4) {
            case 0: m[pos] ^= static_cast<uint8_t>(1u << (rnd() % 8)); break;
            case 1: m[pos] = static_cast<uint8_t>(rnd()); break;
            case 2:
                if (pos + 8 <= m.size()) cbltest::patch_u64(m, pos, specials[rnd() % 10]);
                break;
            default: m.resize(pos); break;
            }
            if (m.empty()) break;
        }
        try {
            auto f = parse(m);
            ++ok;
            for (const std::string& key : f->keys()) {
                try {
                    (void)f->get_int(key);
                } catch (const cacheblend::error&) {
                }
                try {
                    (void)f->get_string_array_view(key);
                } catch (const cacheblend::error&) {
                }
                try {
                    (void)f->get_float_array(key);
                } catch (const cacheblend::error&) {
                }
            }
            for (const auto& t : f->tensors()) {
                if (t.nbytes) ASSERT_NE(t.data, nullptr);
            }
            (void)f->content_hash();
        } catch (const cacheblend::error&) {
            ++errors;
        }
    }
    EXPECT_GT(errors, 0);
    EXPECT_GT(ok, 0);
}
