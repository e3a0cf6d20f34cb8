// The engine on a backend whose memory is not the host's (issue 12, item 4): a "strict" backend,
// registered by name like CUDA, runs the CPU kernels but says host_memory() == false and refuses
// any pointer that is not one of its own allocations (a host pointer handed to an op on a GPU
// would be a crash or garbage). A session on "strict:0" must then upload the weights, stage the
// blend path's host arrays, copy forward buffers out only through download / copy, and compute
// bit for bit what the CPU computes: plain prefill and decode, chunk precompute, blended prefill.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cacheblend.h"
#include "core/blend/blend.h"
#include "core/kvstore/kv-store.h"
#include "core/util/error.h"
#include "kernels/backend-registry.h"
#include "kernels/cpu/backend-cpu.h"
#include "kernels/kernel-error.h"
#include "util/capi-generate.h"
#include "util/test-util.h"

using namespace cacheblend;

namespace {

// The device's allocations, which siblings share as a GPU's backends share its memory.
struct device_memory {
    std::mutex mu;
    std::map<uintptr_t, size_t> allocs, host_allocs;
};

class strict_backend final : public backend {
public:
    explicit strict_backend(int n_threads,
                            std::shared_ptr<device_memory> mem = std::make_shared<device_memory>())
        : cpu_(make_cpu_backend(n_threads)), mem_(std::move(mem)) {}
    const char* name() const override { return "strict:0"; }
    int n_threads() const override { return cpu_->n_threads(); }
    bool host_memory() const override { return false; }
    // Its own kernels (a CPU pool of its own, as a GPU backend's own stream), the same memory.
    std::unique_ptr<backend> sibling() override {
        return std::make_unique<strict_backend>(n_threads(), mem_);
    }

    void* alloc(size_t bytes) override {
        void* p = cpu_->alloc(bytes);
        std::lock_guard<std::mutex> lock(mem_->mu);
        mem_->allocs[reinterpret_cast<uintptr_t>(p)] = bytes == 0 ? 1 : bytes;
        return p;
    }
    void free(void* p) noexcept override {
        if (!p) return;
        {
            std::lock_guard<std::mutex> lock(mem_->mu);
            mem_->allocs.erase(reinterpret_cast<uintptr_t>(p));
        }
        cpu_->free(p);
    }
    void upload(void* dst, const void* src, size_t b) override {
        mine(dst, b, "upload dst");
        cpu_->upload(dst, src, b);
        ++uploads;
        upload_bytes += b;
    }
    void download(void* dst, const void* src, size_t b) override {
        mine(src, b, "download src");
        ++downloads;
        cpu_->download(dst, src, b);
    }
    void copy(void* dst, const void* src, size_t b) override {
        mine(dst, b, "copy dst");
        mine(src, b, "copy src");
        cpu_->copy(dst, src, b);
    }
    void synchronize() override {}

    // Host memory for upload_async: tracked, so a copy from any other memory is refused (on a
    // GPU it would be a synchronous staging copy, not one beside compute).
    void* alloc_host(size_t bytes) override {
        void* p = backend::alloc_host(bytes);
        std::lock_guard<std::mutex> lock(mem_->mu);
        mem_->host_allocs[reinterpret_cast<uintptr_t>(p)] = bytes == 0 ? 1 : bytes;
        return p;
    }
    void free_host(void* p) noexcept override {
        {
            std::lock_guard<std::mutex> lock(mem_->mu);
            mem_->host_allocs.erase(reinterpret_cast<uintptr_t>(p));
        }
        backend::free_host(p);
    }
    // Copies beside compute, modelled as late as a GPU may run them: the bytes move only when
    // the compute side first waits for them (or at finish_upload), so an op that reads dst
    // before wait_upload, or a host source changed before finish_upload, computes with the wrong
    // data and the bit-for-bit comparisons fail.
    uint64_t upload_async(void* dst, const void* src, size_t b) override {
        mine(dst, b, "upload_async dst");
        {
            std::lock_guard<std::mutex> lock(mem_->mu);
            const auto u = reinterpret_cast<uintptr_t>(src);
            auto it = mem_->host_allocs.upper_bound(u);
            if (it == mem_->host_allocs.begin() ||
                u + b > std::prev(it)->first + std::prev(it)->second) {
                throw kernel_error(kernel_status::invalid_arg,
                                   "strict: upload_async source is not alloc_host memory");
            }
        }
        pending_[next_ticket_] = {dst, src, b};
        ++async_uploads;
        ++unfinished_uploads;
        return next_ticket_++;
    }
    void wait_upload(uint64_t t) override { land(t, false); }
    void finish_upload(uint64_t t) override {
        land(t, true);
        pending_.erase(t);
        --unfinished_uploads;
    }

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
    void relocate_kv(const void* k_src, dtype k_type, const uint16_t* v_src, int64_t n,
                     int64_t ld_src, const int32_t* pos, int n_kv_head, int head_dim,
                     const rope_params& rope, uint16_t* k_cache, uint16_t* v_cache,
                     int64_t ld_cache) override {
        mine(k_src, 1, "relocate k_src");
        mine(v_src, 1, "relocate v_src");
        mine(pos, 1, "relocate pos");
        if (rope.freq_factors) mine(rope.freq_factors, 1, "relocate freq_factors");
        mine(k_cache, 1, "relocate k_cache");
        mine(v_cache, 1, "relocate v_cache");
        ++relocations;
        cpu_->relocate_kv(k_src, k_type, v_src, n, ld_src, pos, n_kv_head, head_dim, rope, k_cache,
                          v_cache, ld_cache);
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
    void gather_rows(const void* src, size_t src_stride, const int32_t* idx, int64_t n,
                     size_t row_bytes, void* dst, size_t dst_stride) override {
        mine(src, 1, "gather_rows src");
        mine(idx, 1, "gather_rows idx");
        mine(dst, 1, "gather_rows dst");
        cpu_->gather_rows(src, src_stride, idx, n, row_bytes, dst, dst_stride);
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

    static inline int uploads = 0, relocations = 0, deviations = 0, async_uploads = 0,
                      downloads = 0;
    static inline int unfinished_uploads = 0;  // every upload_async is finished exactly once
    static inline size_t upload_bytes = 0;     // by upload()

private:
    struct pending_copy {
        void* dst;
        const void* src;
        size_t bytes;
        bool done = false;
    };
    void land(uint64_t t, bool finishing) {
        auto it = pending_.find(t);
        if (it == pending_.end()) {
            throw kernel_error(kernel_status::internal,
                               std::string("strict: ") + (finishing ? "finish" : "wait") +
                                   "_upload of an unknown or finished ticket");
        }
        if (!it->second.done) cpu_->upload(it->second.dst, it->second.src, it->second.bytes);
        it->second.done = true;
    }

    // [p, p + bytes) inside one allocation of ours, else the error a GPU would not give.
    void mine(const void* p, size_t bytes, const char* what) const {
        const auto u = reinterpret_cast<uintptr_t>(p);
        std::lock_guard<std::mutex> lock(mem_->mu);
        auto it = mem_->allocs.upper_bound(u);
        if (p && it != mem_->allocs.begin()) {
            --it;
            if (u + bytes <= it->first + it->second) return;
        }
        throw kernel_error(kernel_status::invalid_arg,
                           std::string("strict: ") + what + " is not backend memory");
    }

    std::unique_ptr<backend> cpu_;
    std::shared_ptr<device_memory> mem_;
    std::map<uint64_t, pending_copy> pending_;
    uint64_t next_ticket_ = 1;
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
    // Blended prefills at ratio `ratio` under `policy` after precomputing every chunk into its
    // own store: the request, then the request with its chunks in the other order (the engine's
    // memory kept across requests must not carry the first one's layers into the second).
    std::vector<std::vector<float>> blend(session& s, const std::string& store_dir, float ratio,
                                          select_policy policy = select_policy::hkvd,
                                          deviation_kind dev = deviation_kind::v,
                                          kv_format format = kv_format::f16) {
        kv_store_params kp;
        kp.dir = store_dir;
        std::shared_ptr<kv_store> store = kv_store::open(kp);
        blend_params p;
        p.mode = blend_mode::blend;
        p.ratio = ratio;
        p.select = policy;
        p.deviation = dev;
        p.format = format;
        p.write_back = false;
        blend_engine eng(s, store, p);
        for (const auto& c : req_.chunks) eng.precompute_chunk(req_.preamble, c);
        std::vector<std::vector<float>> out;
        blend_request req = req_;
        prefill_downloads_ = 0;
        for (int i = 0; i < 2; ++i) {
            blend_stats st;
            const int d0 = strict_backend::downloads;
            out.push_back(eng.prefill(req, &st));
            prefill_downloads_ += strict_backend::downloads - d0;
            EXPECT_EQ(st.chunks_hit, static_cast<int32_t>(req.chunks.size()));
            std::reverse(req.chunks.begin(), req.chunks.end());
        }
        return out;
    }

    std::shared_ptr<const model> model_;
    std::string dir_;
    blend_request req_;
    int prefill_downloads_ = 0;  // by the last blend()'s prefills
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
    const int async_uploads = strict_backend::async_uploads;
    const auto a = blend(*cpu, dir_ + "/kv-cpu", 0.3f);
    const auto b = blend(*dev, dir_ + "/kv-dev", 0.3f);
    EXPECT_GT(strict_backend::relocations, relocations);  // the blend ops ran on the device
    EXPECT_GT(strict_backend::deviations, deviations);
    // Stored layers went up whole, beside compute (K and V of every layer from the check layer
    // on, in each of the two requests) ...
    const int n_layer = model_->hparams().n_layer;
    EXPECT_EQ(strict_backend::async_uploads - async_uploads, 2 * 2 * (n_layer - 1));
    // ... and nothing came down row by row: per request the deviations (one array per check
    // layer) and the logits, where the candidates are every reused row.
    EXPECT_LE(prefill_downloads_, 2 * 4);
    EXPECT_EQ(strict_backend::unfinished_uploads, 0);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(a, b);
}

// The other signals, schedules and store formats on the device path: K deviation (f16 keys
// gathered as stored; f32 keys, of the exact and q8 formats, gathered and rounded on the device,
// and relocated from f32), a policy that chooses before layer 0 (every layer streamed), and the
// question's attention.
TEST_F(DeviceBackendTest, BlendPoliciesMatchTheCpuBitForBit) {
    auto cpu = open("cpu");
    auto dev = open("strict:0");
    struct variant {
        select_policy policy;
        deviation_kind dev;
        kv_format format;
    };
    for (const variant& v : {variant{select_policy::hkvd, deviation_kind::kv, kv_format::f16},
                             variant{select_policy::sink, deviation_kind::v, kv_format::f16},
                             variant{select_policy::query_hkvd, deviation_kind::k, kv_format::f16},
                             variant{select_policy::hkvd, deviation_kind::kv, kv_format::exact},
                             variant{select_policy::hkvd, deviation_kind::k, kv_format::q8}}) {
        const std::string tag = std::string(select_policy_name(v.policy)) + "-" +
                                std::to_string(static_cast<int>(v.dev)) + "-" +
                                kv_format_name(v.format);
        SCOPED_TRACE(tag);
        const auto a = blend(*cpu, dir_ + "/kv-cpu-" + tag, 0.15f, v.policy, v.dev, v.format);
        const auto b = blend(*dev, dir_ + "/kv-dev-" + tag, 0.15f, v.policy, v.dev, v.format);
        EXPECT_EQ(a, b);
        EXPECT_EQ(strict_backend::unfinished_uploads, 0);
    }
}

// A device runtime uploads the weights once for all its sessions (rag_runtime::shared_weights):
// each C ABI session runs on a sibling of the runtime's backend (siblings share the device's
// memory, as a GPU's backends do) and answers as a session on the CPU does.
TEST_F(DeviceBackendTest, RuntimeSessionsShareOneUploadOfTheWeights) {
    CBL_REQUIRE_DEFAULT_MODEL(path);
    const size_t b0 = strict_backend::upload_bytes;
    open("strict:0");  // a session without a runtime uploads its own
    const size_t own = strict_backend::upload_bytes - b0;
    ASSERT_GT(own, size_t(1) << 20);

    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.model_path = path.c_str();
    const std::string data = dir_ + "/data";
    rp.data_dir = data.c_str();
    rp.device = "strict:0";
    rp.no_embedder = true;
    rp.n_threads = 2;
    cbl_runtime* rt = nullptr;
    ASSERT_EQ(cbl_runtime_open(&rp, &rt), CBL_OK) << cbl_last_error();
    cbl_session_params sp;
    cbl_session_params_init(&sp);
    sp.n_ctx = 512;
    sp.n_threads = 2;
    cbl_session* s[2] = {};
    size_t made[2] = {};
    for (int i = 0; i < 2; ++i) {
        const size_t before = strict_backend::upload_bytes;
        ASSERT_EQ(cbl_session_create(rt, &sp, &s[i]), CBL_OK) << cbl_last_error();
        made[i] = strict_backend::upload_bytes - before;
    }
    EXPECT_GE(made[0], own * 9 / 10);  // the first session's request uploads the runtime's copy
    EXPECT_LT(made[1], own / 100);     // the second reads it

    std::vector<int32_t> prompt(req_.preamble.begin(), req_.preamble.end());
    prompt.insert(prompt.end(), req_.question.begin(), req_.question.end());
    auto greedy = [&](cbl_session* ses) {
        EXPECT_EQ(cbl_session_prefill_tokens(ses, prompt.data(), prompt.size(), nullptr), CBL_OK)
            << cbl_last_error();
        return cbltest::greedy_tokens(ses, 8);
    };
    cbl_model* m = nullptr;
    ASSERT_EQ(cbl_runtime_model(rt, &m), CBL_OK);
    cbl_session_params cp = sp;
    cp.device = "cpu";
    cbl_session* cpu = nullptr;
    ASSERT_EQ(cbl_session_create_with(m, nullptr, &cp, &cpu), CBL_OK) << cbl_last_error();
    const std::vector<int32_t> want = greedy(cpu);
    EXPECT_EQ(want.size(), 8u);
    EXPECT_EQ(greedy(s[0]), want);
    EXPECT_EQ(greedy(s[1]), want);
    cbl_session_free(cpu);
    cbl_model_free(m);
    cbl_session_free(s[0]);
    cbl_runtime_free(rt);  // a session may outlive its runtime: the weights stay with it
    EXPECT_EQ(greedy(s[1]), want);
    cbl_session_free(s[1]);
}
