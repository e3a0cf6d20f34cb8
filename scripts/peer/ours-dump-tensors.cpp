// Runs our forward pass op by op through the CPU backend (llama-family models without QKV
// biases) and writes each op's f32 output as OUT_DIR/NAME.bin, named as llama.cpp's graph
// (attn_norm-L, Vcur-L, Kcur-L, Qcur-L, kqv_out-L, ..., l_out-L, result_norm, result_output), for
// a bitwise comparison with dump-tensors.py by compare-tensors.py.
//
// Build against a build dir B (not part of the CMake targets; a diagnostic):
//   g++ -std=c++17 -O2 -I. -Itests scripts/peer/ours-dump-tensors.cpp tests/util/json.cpp \
//       B/libcacheblend.a -lmimalloc -lpthread -o B/ours-dump-tensors
// Usage: ours-dump-tensors PARITY.json CASE OUT_DIR [THREADS [MODEL.gguf]]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/engine/forward.h"
#include "core/model/model-registry.h"
#include "core/model/model.h"
#include "util/json.h"

using namespace cacheblend;

namespace {

std::string g_dir;

void dump(const std::string& name, const float* p, size_t n) {
    FILE* f = std::fopen((g_dir + "/" + name + ".bin").c_str(), "wb");
    if (!f) {
        std::fprintf(stderr, "cannot write %s/%s.bin\n", g_dir.c_str(), name.c_str());
        std::exit(1);
    }
    std::fwrite(p, sizeof(float), n, f);
    std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s PARITY.json CASE OUT_DIR [THREADS [MODEL.gguf]]\n", argv[0]);
        return 2;
    }
    const auto fx = cbltest::load_json_file(argv[1]);
    const int cs = std::atoi(argv[2]);
    g_dir = argv[3];
    const int nthr = argc > 4 ? std::atoi(argv[4]) : 1;
    // The parity fixture is SmolLM2's: without MODEL, $CBL_MODEL (a path or a name), else
    // smollm2-135m, never the library's default model.
    const char* env = std::getenv("CBL_MODEL");
    const std::string arg = argc > 5 ? argv[5] : env && *env ? env : "smollm2-135m";
    auto m = model::load(resolve_model(arg).path);
    auto be = create_cpu_backend(nthr);
    const auto& hp = m->hparams();
    kv_cache cache(*be, hp, 512);
    std::vector<token_id> p;
    for (const auto& t : fx["cases"].arr[cs]["prompt_tokens"].arr) p.push_back(token_id(t.as_int()));
    const int n = static_cast<int>(p.size());
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = i;
    const int64_t E = hp.n_embd, QD = hp.q_dim(), KD = hp.kv_dim(), FF = hp.n_ff;
    std::vector<float> x(n * E), h(n * E), q(n * QD), k(n * KD), v(n * KD), att(n * QD),
        ao(n * E), g(n * FF), u(n * FF), fo(n * E);
    be->get_rows(m->tok_embd(), p.data(), n, x.data(), E);
    for (int l = 0; l < hp.n_layer; ++l) {
        const auto& L = m->layers()[l];
        const std::string s = "-" + std::to_string(l);
        be->rms_norm(x.data(), n, E, E, L.attn_norm, hp.rms_eps, h.data(), E);
        dump("attn_norm" + s, h.data(), n * E);
        be->matmul(L.wq, h.data(), n, E, q.data(), QD, nullptr);
        be->matmul(L.wk, h.data(), n, E, k.data(), KD, nullptr);
        be->matmul(L.wv, h.data(), n, E, v.data(), KD, nullptr);
        dump("Vcur" + s, v.data(), n * KD);
        be->rope(q.data(), n, QD, hp.n_head, hp.head_dim, pos.data(), hp.rope);
        be->rope(k.data(), n, KD, hp.n_head_kv, hp.head_dim, pos.data(), hp.rope);
        dump("Qcur" + s, q.data(), n * QD);
        dump("Kcur" + s, k.data(), n * KD);
        be->store_rows_f16(k.data(), n, KD, KD, pos.data(), cache.k(l), KD);
        be->store_rows_f16(v.data(), n, KD, KD, pos.data(), cache.v(l), KD);
        attention_args aa;
        aa.q = q.data();
        aa.n_q = n;
        aa.q_stride = QD;
        aa.q_pos = pos.data();
        aa.k = cache.k(l);
        aa.v = cache.v(l);
        aa.kv_stride = KD;
        aa.n_keys = n;
        aa.n_head = hp.n_head;
        aa.n_kv_head = hp.n_head_kv;
        aa.head_dim = hp.head_dim;
        aa.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
        aa.out = att.data();
        aa.out_stride = QD;
        be->attention(aa);
        dump("kqv_out" + s, att.data(), n * QD);
        be->matmul(L.wo, att.data(), n, QD, ao.data(), E, nullptr);
        dump("attn_out" + s, ao.data(), n * E);
        be->add_rows(x.data(), ao.data(), n, E, E);
        dump("ffn_inp" + s, x.data(), n * E);
        be->rms_norm(x.data(), n, E, E, L.ffn_norm, hp.rms_eps, h.data(), E);
        dump("ffn_norm" + s, h.data(), n * E);
        be->matmul(L.w_gate, h.data(), n, E, g.data(), FF, nullptr);
        dump("ffn_gate" + s, g.data(), n * FF);
        be->matmul(L.w_up, h.data(), n, E, u.data(), FF, nullptr);
        dump("ffn_up" + s, u.data(), n * FF);
        be->swiglu(g.data(), u.data(), n, FF, FF, g.data());
        dump("ffn_swiglu" + s, g.data(), n * FF);
        be->matmul(L.w_down, g.data(), n, FF, fo.data(), E, nullptr);
        dump("ffn_out" + s, fo.data(), n * E);
        be->add_rows(x.data(), fo.data(), n, E, E);
        dump("l_out" + s, x.data(), n * E);
    }
    // llama.cpp computes the head for the last token only.
    be->rms_norm(x.data() + (n - 1) * E, 1, E, E, m->output_norm(), hp.rms_eps, h.data(), E);
    dump("result_norm", h.data(), E);
    std::vector<float> logits(hp.n_vocab);
    be->matmul(m->output(), h.data(), 1, E, logits.data(), hp.n_vocab, nullptr);
    dump("result_output", logits.data(), hp.n_vocab);
    return 0;
}
