// The engine on a backend whose memory is not the host's (issue 12, item 4): a "strict" backend,
// registered by name like CUDA, runs the CPU kernels but says host_memory() == false and refuses
// any pointer that is not one of its own allocations (a host pointer handed to an op on a GPU
// would be a crash or garbage). A session on "strict:0" must then upload the weights, stage the
// blend path's host arrays, copy forward buffers out only through download / copy, and compute
// bit for bit what the CPU computes: plain prefill and decode, chunk precompute, blended prefill.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/blend/blend.h"
#include "core/kvstore/kv-store.h"
#include "core/util/error.h"
#include "kernels/backend-registry.h"
#include "kernels/cpu/backend-cpu.h"
#include "kernels/kernel-error.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

class strict_backend final : public backend {
public:
    explicit strict_backend(int n_threads) : cpu_(make_cpu_backend(n_threads)) {}
    const char* name() const override { return "strict:0"; }
    int n_threads() const override { return cpu_->n_threads(); }
    bool host_memory() const override { return false; }

    void* alloc(size_t bytes) override {
        void* p = cpu_->alloc(bytes);
        std::lock_guard<std::mutex> lock(mu_);
        allocs_[reinterpret_cast<uintptr_t>(p)] = bytes == 0 ? 1 : bytes;
        return p;
    }
    void free(void* p) noexcept override {
        if (!p) return;
        {
            std::lock_guard<std::mutex> lock(mu_);
            allocs_.erase(reinterpret_cast<uintptr_t>(p));
        }
        cpu_->free(p);
    }
    void upload(void* dst, const void* src, size_t b) override {
        mine(dst, b, "upload dst");
        cpu_->upload(dst, src, b);
        ++uploads;
    }
    void download(void* dst, const void* src, size_t b) override {
        mine(src, b, "download src");
        cpu_->download(dst, src, b);
    }
    void copy(void* dst, const void* src, size_t b) override {
        mine(dst, b, "copy dst");
        mine(src, b, "copy src");
        cpu_->copy(dst, src, b);
    }
    void synchronize() override {}

    void matmul(const weight_view& w, const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy,
                const float* bias) override {
        mine(w.data, 1, "matmul weights");
        mine(x, 1, "matmul x");
        mine(y, 1, "matmul y");
        if (bias) mine(bias, 1, "matmul bias");
        cpu_->matmul(w, x, m, ldx, y, ldy, bias);
    }
    void get_rows(const weight_view& w, const int32_t* ids, int64_t m, float* y,
                  int64_t ldy) override {
        mine(w.data, 1, "get_rows weights");
        mine(ids, 1, "get_rows ids");
        mine(y, 1, "get_rows y");
        cpu_->get_rows(w, ids, m, y, ldy);
    }
    void rms_norm(const float* x, int64_t m, int64_t n, int64_t ldx, const float* gamma, float eps,
                  float* y, int64_t ldy) override {
        mine(x, 1, "rms_norm x");
        mine(gamma, 1, "rms_norm gamma");
        mine(y, 1, "rms_norm y");
        cpu_->rms_norm(x, m, n, ldx, gamma, eps, y, ldy);
    }
    void rope(float* x, int64_t m, int64_t ldx, int n_head, int head_dim, const int32_t* pos,
              const rope_params& p) override {
        mine(x, 1, "rope x");
        mine(pos, 1, "rope pos");
        if (p.freq_factors) mine(p.freq_factors, 1, "rope freq_factors");
        cpu_->rope(x, m, ldx, n_head, head_dim, pos, p);
    }
    void store_rows_f16(const float* src, int64_t m, int64_t n, int64_t ldsrc, const int32_t* pos,
                        uint16_t* cache, int64_t ld_cache) override {
        mine(src, 1, "store_rows src");
        mine(pos, 1, "store_rows pos");
        mine(cache, 1, "store_rows cache");
        cpu_->store_rows_f16(src, m, n, ldsrc, pos, cache, ld_cache);
    }
    void attention(const attention_args& a) override {
        for (const void* p : {static_cast<const void*>(a.q), static_cast<const void*>(a.q_pos),
                              static_cast<const void*>(a.k), static_cast<const void*>(a.v),
                              static_cast<const void*>(a.out)}) {
            mine(p, 1, "attention");
        }
        cpu_->attention(a);
    }
    void swiglu(const float* gate, const float* up, int64_t m, int64_t n, int64_t ld,
                float* out) override {
        mine(gate, 1, "swiglu gate");
        mine(up, 1, "swiglu up");
        mine(out, 1, "swiglu out");
        cpu_->swiglu(gate, up, m, n, ld, out);
    }
    void add_rows(float* y, const float* x, int64_t m, int64_t n, int64_t ld) override {
        mine(y, 1, "add_rows y");
        mine(x, 1, "add_rows x");
        cpu_->add_rows(y, x, m, n, ld);
    }
    void relocate_kv(const float* k_src, const uint16_t* v_src, int64_t n, int64_t ld_src,
                     const int32_t* pos, int n_kv_head, int head_dim, const rope_params& rope,
                     uint16_t* k_cache, uint16_t* v_cache, int64_t ld_cache) override {
        mine(k_src, 1, "relocate k_src");
        mine(v_src, 1, "relocate v_src");
        mine(pos, 1, "relocate pos");
        if (rope.freq_factors) mine(rope.freq_factors, 1, "relocate freq_factors");
        mine(k_cache, 1, "relocate k_cache");
        mine(v_cache, 1, "relocate v_cache");
        ++relocations;
        cpu_->relocate_kv(k_src, v_src, n, ld_src, pos, n_kv_head, head_dim, rope, k_cache, v_cache,
                          ld_cache);
    }
    void kv_deviation(const float* fresh, int64_t ld_fresh, const uint16_t* cached,
                      int64_t ld_cached, int64_t n, int64_t width, float* d) override {
        mine(fresh, 1, "kv_deviation fresh");
        mine(cached, 1, "kv_deviation cached");
        mine(d, 1, "kv_deviation d");
        ++deviations;
        cpu_->kv_deviation(fresh, ld_fresh, cached, ld_cached, n, width, d);
    }
    void attention_mass(const attention_args& a, float* scores) override {
        for (const void* p : {static_cast<const void*>(a.q), static_cast<const void*>(a.q_pos),
                              static_cast<const void*>(a.k), static_cast<const void*>(scores)}) {
            mine(p, 1, "attention_mass");
        }
        cpu_->attention_mass(a, scores);
    }
    void layer_norm(const float*, int64_t, int64_t, int64_t, const float*, const float*, float,
                    float*, int64_t) override {
        throw kernel_error(kernel_status::unsupported, "strict: no encoder");
    }
    void gelu_erf(float*, int64_t, int64_t, int64_t) override {
        throw kernel_error(kernel_status::unsupported, "strict: no encoder");
    }
    void encoder_attention(const encoder_attention_args&) override {
        throw kernel_error(kernel_status::unsupported, "strict: no encoder");
    }

    static inline int uploads = 0, relocations = 0, deviations = 0;

private:
    // [p, p + bytes) inside one allocation of ours, else the error a GPU would not give.
    void mine(const void* p, size_t bytes, const char* what) const {
        const auto u = reinterpret_cast<uintptr_t>(p);
        std::lock_guard<std::mutex> lock(mu_);
        auto it = allocs_.upper_bound(u);
        if (p && it != allocs_.begin()) {
            --it;
            if (u + bytes <= it->first + it->second) return;
        }
        throw kernel_error(kernel_status::invalid_arg,
                           std::string("strict: ") + what + " is not backend memory");
    }

    std::unique_ptr<backend> cpu_;
    mutable std::mutex mu_;
    std::map<uintptr_t, size_t> allocs_;
};

void register_strict() {
    backend_factory f;
    f.name = "strict";
    f.device_count = [] { return 1; };
    f.create = [](int, int n) { return std::make_unique<strict_backend>(n); };
    backend_registry::global().add(f);
}

std::string make_temp_dir() {
    char tmpl[] = "/tmp/cbl-device-XXXXXX";
    const char* d = mkdtemp(tmpl);
    return d ? d : "";
}

class DeviceBackendTest : public ::testing::Test {
protected:
    void SetUp() override {
        CBL_REQUIRE_DEFAULT_MODEL(path);
        register_strict();
        model_ = model::load(path);
        dir_ = make_temp_dir();
        ASSERT_FALSE(dir_.empty());
        const tokenizer& t = model_->vocab();
        req_.preamble = t.encode(
            "<|im_start|>system\nAnswer from the passages.<|im_end|>\n"
            "<|im_start|>user\n",
            false, true);
        for (const char* p : {"The Danube rises in the Black Forest of Germany and flows through "
                              "ten countries before it reaches the Black Sea in Romania.\n",
                              "Mount Kilimanjaro is a dormant volcano in Tanzania; Hans Meyer and "
                              "Ludwig Purtscheller first climbed it in 1889.\n"}) {
            req_.chunks.push_back(t.encode(p, false, false));
        }
        req_.question = t.encode(
            "Who first climbed Kilimanjaro?<|im_end|>\n"
            "<|im_start|>assistant\n",
            false, true);
    }
    void TearDown() override {
        if (!dir_.empty() && std::system(("rm -rf '" + dir_ + "'").c_str()) != 0) {
            std::fprintf(stderr, "cleanup of %s failed\n", dir_.c_str());
        }
    }
    std::unique_ptr<session> open(const std::string& device) {
        session_params sp;
        sp.n_ctx = 512;
        sp.n_threads = 2;
        sp.device = device;
        return std::make_unique<session>(model_, sp);
    }
    // Blended prefill at ratio `ratio` after precomputing every chunk into its own store.
    std::vector<float> blend(session& s, const std::string& store_dir, float ratio) {
        kv_store_params kp;
        kp.dir = store_dir;
        std::shared_ptr<kv_store> store = kv_store::open(kp);
        blend_params p;
        p.mode = blend_mode::blend;
        p.ratio = ratio;
        p.write_back = false;
        blend_engine eng(s, store, p);
        for (const auto& c : req_.chunks) eng.precompute_chunk(req_.preamble, c);
        blend_stats st;
        std::vector<float> logits = eng.prefill(req_, &st);
        EXPECT_EQ(st.chunks_hit, static_cast<int32_t>(req_.chunks.size()));
        return logits;
    }

    std::shared_ptr<const model> model_;
    std::string dir_;
    blend_request req_;
};

}  // namespace

TEST_F(DeviceBackendTest, RegisteredBackendIsOpenedByName) {
    auto s = open("strict:0");
    EXPECT_STREQ(s->get_backend().name(), "strict:0");
    EXPECT_FALSE(s->get_backend().host_memory());
    // The weights were uploaded: the session reads none of the model's host views.
    EXPECT_NE(s->weights().tok_embd.data, model_->tok_embd().data);
    EXPECT_NE(s->weights().layers[0].attn_norm, model_->layers()[0].attn_norm);
}

TEST_F(DeviceBackendTest, PrefillAndDecodeMatchTheCpuBitForBit) {
    std::vector<token_id> prompt(req_.preamble);
    for (const auto& c : req_.chunks) prompt.insert(prompt.end(), c.begin(), c.end());
    prompt.insert(prompt.end(), req_.question.begin(), req_.question.end());
    generation_params gp;
    gp.max_tokens = 12;
    auto cpu = open("cpu");
    auto dev = open("strict:0");
    const generation_result a = cpu->generate(prompt, gp);
    const generation_result b = dev->generate(prompt, gp);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(cpu->prefill({a.tokens.empty() ? token_id(1) : a.tokens[0]}),
              dev->prefill({a.tokens.empty() ? token_id(1) : a.tokens[0]}));
}

TEST_F(DeviceBackendTest, BlendedPrefillMatchesTheCpuBitForBit) {
    auto cpu = open("cpu");
    auto dev = open("strict:0");
    const int relocations = strict_backend::relocations;
    const int deviations = strict_backend::deviations;
    const std::vector<float> a = blend(*cpu, dir_ + "/kv-cpu", 0.3f);
    const std::vector<float> b = blend(*dev, dir_ + "/kv-dev", 0.3f);
    EXPECT_GT(strict_backend::relocations, relocations);  // the blend ops ran on the device
    EXPECT_GT(strict_backend::deviations, deviations);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(a, b);
}
