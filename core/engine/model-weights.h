// The model's weights where a backend can read them (docs/ARCHITECTURE.md, 'Backends'). On a
// host-memory backend (the CPU) they are the model's own views into the GGUF mapping, nothing
// copied; on a device backend (CUDA) every tensor the forward pass reads (matrices, norms,
// biases, RoPE frequency factors) is uploaded once into backend buffers this object owns.
#pragma once

#include <memory>
#include <vector>

#include "core/engine/backend.h"
#include "core/model/model.h"

namespace cacheblend {

struct model_weights {
    std::vector<layer_weights> layers;
    weight_view tok_embd, output;
    const float* output_norm = nullptr;
    rope_params rope;  // hparams().rope with freq_factors in backend memory
};

class backend_weights {
public:
    // Keeps a reference to be, which must outlive this object.
    backend_weights(const model& m, backend& be);
    // Uploads to be and keeps it alive: weights that sessions on be's siblings share
    // (session_params::weights, one copy in a GPU's memory for a runtime's sessions). Every
    // upload has finished when this returns, so other streams may read them.
    backend_weights(const model& m, std::shared_ptr<backend> be);
    backend_weights(const backend_weights&) = delete;
    backend_weights& operator=(const backend_weights&) = delete;

    const model_weights& get() const { return w_; }
    size_t uploaded_bytes() const { return uploaded_; }

private:
    const float* upload_floats(const float* host, int64_t n);
    weight_view upload_matrix(const weight_view& host);

    std::shared_ptr<backend> keep_;  // declared first: outlives the buffers it frees
    backend& be_;
    model_weights w_;
    std::vector<backend_buffer> owned_;
    size_t uploaded_ = 0;
};

}  // namespace cacheblend
