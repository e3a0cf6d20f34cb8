// The document filter of the retrieval subcommands (search, ask): --collection C, --uri-prefix P
// and --filter KEY=VALUE (repeatable; every one must match), as the C ABI's filter fields take it.
#pragma once

#include <string>
#include <vector>

#include "args.h"

namespace cacheblend::cli {

std::vector<flag_spec> filter_flags();

struct doc_filter {
    std::string collection;  // empty: any
    std::string uri_prefix;  // resolved like ingest names files; empty: any
    std::vector<std::string> keys, values;
    std::vector<const char*> key_ptrs, value_ptrs;  // for the params structs

    const char* collection_or_null() const { return collection.empty() ? nullptr : collection.c_str(); }
    const char* uri_prefix_or_null() const { return uri_prefix.empty() ? nullptr : uri_prefix.c_str(); }
};

// The filter the flags describe; bad usage throws usage_error naming `cmd`.
doc_filter parse_filter_flags(const parsed_args& a, const std::string& cmd);

}  // namespace cacheblend::cli
