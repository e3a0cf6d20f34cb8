// Generated Unicode tables (core/tokenizer/unicode-data.cpp, from scripts/gen-unicode-data.py).
#pragma once

#include <cstddef>
#include <cstdint>

namespace cacheblend {
namespace unicode_data {

// Category codes in the low 8 bits of k_category_ranges entries.
enum category_code : uint8_t {
    cat_undefined = 0, cat_number = 1, cat_letter = 2, cat_separator = 3,
    cat_mark = 4, cat_punctuation = 5, cat_symbol = 6, cat_control = 7,
};

extern const char k_unicode_version[];
// (first codepoint << 8) | category_code, ascending; each range ends where the next begins.
extern const uint32_t k_category_ranges[];
extern const size_t k_n_category_ranges;
// Unicode White_Space codepoints, ascending.
extern const uint32_t k_whitespace[];
extern const size_t k_n_whitespace;

}  // namespace unicode_data
}  // namespace cacheblend
