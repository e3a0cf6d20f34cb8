// Calibrated recompute ratios (quality guard; docs/ARCHITECTURE.md, 'Blended prefill'): `cacheblend
// calibrate` measures blending fidelity against full prefill for one model and KV format and
// records the smallest ratio that met its target; sessions asking for the calibrated ratio use it,
// and run full when no ratio below 1 met the target. Records live in the KV store's folder, one
// small text file ("calibration", 0600), replaced atomically (temp file, fsync, rename, folder
// fsync), so every process sharing the store sees either the old or the new set.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/blend/selection.h"
#include "core/kvstore/kv-store.h"
#include "core/util/file-io.h"

namespace cacheblend {

struct calibration {
    uint64_t model_fingerprint = 0;
    kv_format format = kv_format::f16;
    float ratio = 1.f;         // the smallest measured ratio that met the target (1 when none did)
    // The selection policy the ratio was measured with (a ratio means nothing without it). A
    // record written before policies existed has none and reads as hkvd, and an hkvd record is
    // written without it, so files of hkvd records stay readable by older builds.
    select_policy select = select_policy::hkvd;
    bool met = false;          // false: no ratio below 1 met the target, so requests run full
    std::string metric;        // "fidelity", "agreement" or "kl" ([a-z_]+)
    double target = 0;         // fidelity/agreement: at least this; kl: at most this
    double value = 0;          // the metric measured at `ratio`
    int32_t records = 0;       // how many records the measurement used
};

// The record for (model, format), or nothing. A missing file is no record; an unreadable or
// malformed one is error(status::corrupt/format/io) naming the file (never guessed around).
std::optional<calibration> read_calibration(const std::string& store_dir, uint64_t model_fp,
                                            kv_format format,
                                            const std::shared_ptr<file_io>& io = posix_file_io());

// Adds or replaces the record of (c.model_fingerprint, c.format), keeping the others.
void write_calibration(const std::string& store_dir, const calibration& c,
                       const std::shared_ptr<file_io>& io = posix_file_io());

}  // namespace cacheblend
