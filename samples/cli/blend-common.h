// Helpers shared by `cacheblend blend` and `cacheblend eval`: the KV store location, the blending
// flags and their parsing into the experimental C API's knobs, reading chunk files.
#pragma once

#include <string>
#include <vector>

#include "args.h"
#include "cacheblend.h"
#include "cacheblend_experimental.h"
#include "capi-util.h"

namespace cacheblend::cli {

// ${XDG_CACHE_HOME:-$HOME/.cache}/cacheblend/kv
std::string default_kv_store_dir();

// The library's default recompute ratio (cbl_x_blend_params_init), and its "0.15" for help texts:
// the CLI never writes the number itself.
float default_ratio();
std::string default_ratio_text();

// --ratio R|auto|calibrated (ask, blend).
flag_spec ratio_flag();
// --mode with the library's mode names and default.
flag_spec mode_flag();

flag_spec store_flag();
// --data DIR: use the data directory's own store, DIR/kv, where `ingest` and `ask` keep chunk KV,
// so a calibration recorded there is the one `ask --data DIR --ratio calibrated` finds.
flag_spec store_data_flag();
// --kv-budget SIZE: the store's byte budget (a number with an optional K, M, G or T suffix).
flag_spec kv_budget_flag();
// --kv-remote URL: the shared chunk-KV tier (redis://[user:password@]host:port/db); absent: the
// library reads $CBL_KV_REMOTE. kv_remote_of gives the flag's text or NULL (it lives in `a`).
flag_spec kv_remote_flag();
const char* kv_remote_of(const parsed_args& a);
// The --kv-budget value in bytes; 0 (the library default) when the flag is absent.
uint64_t parse_kv_budget(const parsed_args& a);
// --direct-io: read stored KV with O_DIRECT (bypasses the page cache: cold-read timings).
flag_spec direct_io_flag();
// --check-layers, --check-ratios, --deviation, --select, --kv-format (shared by blend and eval).
std::vector<flag_spec> blend_tuning_flags();
// --select POLICY: which reused tokens are recomputed (blend, eval, calibrate, ask).
flag_spec select_flag();
// The --select value as CBL_X_SELECT_* (CBL_X_SELECT_DEFAULT when absent); a usage error
// naming the valid policies otherwise.
int32_t parse_select(const parsed_args& a);

// What those flags set; params() points into this object, so keep it alive while they are used.
struct blend_tuning {
    std::vector<int32_t> check_layers;
    std::vector<float> check_ratios;
    int32_t deviation = CBL_X_DEVIATION_DEFAULT;
    int32_t select = CBL_X_SELECT_DEFAULT;
    int32_t kv_format = CBL_KV_DEFAULT;

    // The knobs for one run of `mode` at `ratio`.
    cbl_x_blend_params params(int32_t mode, float ratio, bool auto_ratio = false) const;
};
blend_tuning parse_blend_tuning(const parsed_args& a);

// Comma-separated numbers within [min, max], e.g. "0.3,0.15"; usage_error otherwise.
std::vector<double> parse_double_list(const std::string& flag, const std::string& text,
                                      double min, double max);

// Opens --store (or the default) for the engine, with --direct-io when the command declares it.
kvstore_ptr open_store(const parsed_args& a, std::string* dir);

// The whole file as bytes; capi_error(CBL_IO) naming the path when unreadable.
std::string read_text_file(const std::string& path);

}  // namespace cacheblend::cli
