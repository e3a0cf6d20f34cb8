#include "core/blend/device-layers.h"

#include <exception>

#include "core/engine/host-staging.h"
#include "core/util/error.h"

namespace cacheblend {

device_layers::device_layers(backend& be, device_layer_memory* mem, int64_t n_rows, int64_t kv_dim,
                             dtype k_type, acquire_fn acquire)
    : be_(be),
      mem_(mem),
      k_type_(k_type),
      k_bytes_(dtype_row_bytes(k_type, n_rows * kv_dim)),
      v_bytes_(dtype_row_bytes(dtype::f16, n_rows * kv_dim)),
      acquire_(std::move(acquire)) {
    if (k_type != dtype::f32 && k_type != dtype::f16)
        throw error(status::internal, "device_layers: K rows are f32 or f16");
    for (int i = 0; i < 2; ++i) {
        grow_buffer<uint8_t>(be_, &mem_->k[i], k_bytes_);
        grow_buffer<uint16_t>(be_, &mem_->v[i], v_bytes_ / sizeof(uint16_t));
    }
}

device_layers::~device_layers() {
    for (slot& s : slots_) {
        try {
            finish(&s);
        } catch (...) {
            // A device error here was, or will be, reported by the op that met it first.
            s.ticket_k = s.ticket_v = 0;
        }
    }
}

void device_layers::upload(int32_t l) {
    slot& s = slots_[l % 2];
    finish(&s);  // the slot's previous layer (normally retired already)
    const kv_layer_rows rows = acquire_(l);
    if (rows.k_type != k_type_)
        throw error(status::internal, "device_layers: the loader's K type is not the upload's");
    s.layer = l;
    s.ticket_k = be_.upload_async(mem_->k[l % 2].as<void>(), rows.k, k_bytes_);
    s.ticket_v = be_.upload_async(mem_->v[l % 2].as<void>(), rows.v, v_bytes_);
}

void device_layers::finish(slot* s) {
    // Zeroed first: a throwing finish must not be retried by the destructor. Both uploads are
    // finished even when the first throws, so V's copy never reads a slot the loader refills.
    const uint64_t tk = s->ticket_k, tv = s->ticket_v;
    s->ticket_k = s->ticket_v = 0;
    std::exception_ptr first;
    for (uint64_t t : {tk, tv}) {
        if (!t) continue;
        try {
            be_.finish_upload(t);
        } catch (...) {
            if (!first) first = std::current_exception();
        }
    }
    if (first) std::rethrow_exception(first);
}

kv_layer_rows device_layers::get(int32_t l) {
    slot& s = slots_[l % 2];
    if (s.layer != l) upload(l);
    be_.wait_upload(s.ticket_k);
    be_.wait_upload(s.ticket_v);
    return {mem_->k[l % 2].as<void>(), k_type_, mem_->v[l % 2].as<uint16_t>()};
}

void device_layers::retire(int32_t l, layer_loader& loader) {
    finish(&slots_[l % 2]);
    loader.release(l);
}

void device_layers::prefetch(int32_t l, layer_loader& loader) {
    if (slots_[l % 2].layer == l || !loader.ready(l)) return;
    upload(l);
}

}  // namespace cacheblend
