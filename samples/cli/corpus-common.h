// The document filter of the retrieval subcommands (search, ask): --collection C, --uri-prefix P
// and --filter KEY=VALUE (repeatable; every one must match), as the C ABI's filter fields take it.
#pragma once

#include <string>
#include <vector>

#include "args.h"
#include "capi-util.h"

namespace cacheblend::cli {

std::vector<flag_spec> filter_flags();

struct doc_filter {
    std::string collection;  // empty: any
    std::string uri_prefix;  // resolved like ingest names files; empty: any
    std::vector<std::string> keys, values;
    std::vector<const char*> key_ptrs, value_ptrs;  // for the params structs

    // Sets the filter fields of cbl_search_params or cbl_ask_params (same names in both); the
    // pointers refer to this object.
    template <typename Params>
    void apply_to(Params* p) const {
        p->collection = collection.empty() ? nullptr : collection.c_str();
        p->uri_prefix = uri_prefix.empty() ? nullptr : uri_prefix.c_str();
        p->metadata_keys = key_ptrs.data();
        p->metadata_values = value_ptrs.data();
        p->n_metadata = key_ptrs.size();
    }
};

// The filter the flags describe; bad usage throws usage_error naming `cmd`.
doc_filter parse_filter_flags(const parsed_args& a, const std::string& cmd);

// cbl_runtime_open for commands that only read a data directory (search, ask, docs, stats):
// with must_exist set, so a mistyped --data fails (exit 1) telling how to make one, and creates
// nothing.
runtime_ptr open_existing_runtime(cbl_runtime_params* rp);

}  // namespace cacheblend::cli
