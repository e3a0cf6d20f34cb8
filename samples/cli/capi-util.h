// The CLI on the public C ABI (cacheblend.h only): owning wrappers for its handles, a status check
// that turns a failure into an exception carrying the library's message, and names of the ABI's
// enum values for human and JSON output.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cacheblend.h"

namespace cacheblend::cli {

class capi_error : public std::runtime_error {
public:
    capi_error(cbl_status s, const std::string& msg) : std::runtime_error(msg), status_(s) {}
    cbl_status status() const { return status_; }

private:
    cbl_status status_;
};

// Throws capi_error with cbl_last_error() (read right away, on this thread) unless s is CBL_OK.
inline void check(cbl_status s) {
    if (s != CBL_OK) throw capi_error(s, cbl_last_error());
}

template <typename T, void (*Free)(T*)>
struct capi_deleter {
    void operator()(T* p) const { Free(p); }
};
using runtime_ptr = std::unique_ptr<cbl_runtime, capi_deleter<cbl_runtime, cbl_runtime_free>>;
using session_ptr = std::unique_ptr<cbl_session, capi_deleter<cbl_session, cbl_session_free>>;
using answer_ptr = std::unique_ptr<cbl_answer, capi_deleter<cbl_answer, cbl_answer_free>>;
using results_ptr = std::unique_ptr<cbl_results, capi_deleter<cbl_results, cbl_results_free>>;
using documents_ptr =
    std::unique_ptr<cbl_documents, capi_deleter<cbl_documents, cbl_documents_free>>;
using model_ptr = std::unique_ptr<cbl_model, capi_deleter<cbl_model, cbl_model_free>>;
using kvstore_ptr = std::unique_ptr<cbl_kvstore, capi_deleter<cbl_kvstore, cbl_kvstore_free>>;

// Loads a model through the C ABI; "" = the default model ($CBL_MODEL or the user cache).
model_ptr load_model(const std::string& path);
// The library's default thread count (all cores, 1 to 16): what a 0 in a params struct means.
int32_t default_thread_count();

// Names of the ABI's enum values, from the library's one table (cbl_enum_name/cbl_enum_parse):
// the CLI prints, parses and lists exactly the words the library uses.
const char* enum_name(int32_t kind, int32_t value);  // "unknown" for a value the library lacks
// The value of `text` for a flag; an unknown name is a usage error naming the flag and the
// valid names.
int32_t parse_enum(int32_t kind, const std::string& flag, const std::string& text);
// "full, prefix, reuse or blend": the names of a kind, for help texts.
std::string enum_names(int32_t kind);
// A comma-separated list of names of `kind` ("hkvd,sink"), each as parse_enum takes it.
std::vector<int32_t> parse_enum_list(int32_t kind, const std::string& flag,
                                     const std::string& text);
inline const char* mode_name(int32_t mode) { return enum_name(CBL_NAMES_MODE, mode); }
inline const char* search_name(int32_t mode) { return enum_name(CBL_NAMES_SEARCH, mode); }
inline const char* stop_name(int32_t stop) { return enum_name(CBL_NAMES_STOP, stop); }
// The flag value of a CBL_KV_* format (CBL_KV_DEFAULT is f16).
const char* kv_format_name(int32_t format);

// The token's text, or "" when the id is not in the vocabulary.
std::string token_text(const cbl_model* m, int32_t token);

}  // namespace cacheblend::cli
