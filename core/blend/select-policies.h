// One constructor per selection policy (core/blend/select-*.cpp); make_token_selector picks one.
#pragma once

#include <memory>

#include "core/blend/selection.h"

namespace cacheblend {

std::unique_ptr<token_selector> make_hkvd_selector();
std::unique_ptr<token_selector> make_sink_selector();
std::unique_ptr<token_selector> make_sink_hkvd_selector();
std::unique_ptr<token_selector> make_query_selector();
std::unique_ptr<token_selector> make_query_hkvd_selector();

}  // namespace cacheblend
