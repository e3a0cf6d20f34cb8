// CBL_X_SELECT_* <-> select_policy (core/blend/selection.h), for the experimental knobs, the
// calibration record and the CBL_X_NAMES_SELECT names.
#pragma once

#include <cstdint>

#include "cacheblend_experimental.h"
#include "core/blend/selection.h"

namespace cacheblend::capi {

int32_t select_code(select_policy p);
// 0 is hkvd; an unknown value throws invalid_arg naming fn and the valid policies.
select_policy to_select(const char* fn, int32_t code);

}  // namespace cacheblend::capi
