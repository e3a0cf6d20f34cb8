// Models cut down and blown up again (tests/util/gguf-reshape.h), as scripts/gpu-check.sh carries
// them to GPU machines: the cut-down model loads, tokenizes plain text inside its vocabulary and
// runs; blown up to the source's shape it has its layer count and vocabulary again, each row and
// layer a copy of the cut-down one's.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/engine/session.h"
#include "core/model/gguf.h"
#include "core/model/model.h"
#include "util/gguf-reshape.h"
#include "util/gguf-writer.h"
#include "util/test-util.h"

using namespace cacheblend;

TEST(GgufReshape, CutDownAndBlownUpModelsLoadAndRun) {
    CBL_REQUIRE_DEFAULT_MODEL(path);
    const auto src = gguf_file::open(path);
    const std::string arch = *src->get_string("general.architecture");
    const int64_t src_layers = *src->get_int(arch + ".block_count");
    const int64_t src_vocab = int64_t(src->array_info("tokenizer.ggml.tokens")->count);

    cbltest::temp_file small("reshape-small"), big("reshape-big");
    cbltest::reshape_gguf(path, small.path(), {2, 4096});
    const auto cut = model::load(small.path());
    EXPECT_EQ(cut->hparams().n_layer, 2);
    EXPECT_EQ(cut->hparams().n_vocab, 4096);
    const std::vector<token_id> ids =
        cut->vocab().encode("the river flows to the sea", false, false);
    ASSERT_FALSE(ids.empty());
    for (token_id t : ids) EXPECT_LT(t, 4096);
    // Merges into removed tokens are gone, so words split into more (kept) tokens that still
    // spell the text.
    EXPECT_EQ(cut->vocab().decode(ids), "the river flows to the sea");
    session_params sp;
    sp.n_ctx = 64;
    sp.n_threads = 2;
    session s(cut, sp);
    const std::vector<float>& logits = s.prefill(ids);
    ASSERT_EQ(logits.size(), 4096u);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));

    cbltest::reshape_gguf(small.path(), big.path(), {int32_t(src_layers), src_vocab});
    const auto blown = gguf_file::open(big.path());
    EXPECT_EQ(*blown->get_int(arch + ".block_count"), src_layers);
    EXPECT_EQ(int64_t(blown->array_info("tokenizer.ggml.tokens")->count), src_vocab);
    const auto small_file = gguf_file::open(small.path());
    const gguf_tensor* e_cut = small_file->find_tensor("token_embd.weight");
    const gguf_tensor* e_big = blown->find_tensor("token_embd.weight");
    ASSERT_TRUE(e_cut && e_big);
    EXPECT_EQ(e_big->ne[1], src_vocab);
    EXPECT_EQ(e_big->nbytes, src->find_tensor("token_embd.weight")->nbytes);
    const size_t row = e_cut->nbytes / 4096;
    EXPECT_EQ(0, std::memcmp(e_big->data + 5000 * row, e_cut->data + (5000 % 4096) * row, row));
    // Layer 3 is layer 1 of the cut-down model.
    const gguf_tensor* l3 = blown->find_tensor("blk.3.attn_q.weight");
    const gguf_tensor* l1 = src->find_tensor("blk.1.attn_q.weight");
    ASSERT_TRUE(l3 && l1);
    ASSERT_EQ(l3->nbytes, l1->nbytes);
    EXPECT_EQ(0, std::memcmp(l3->data, l1->data, l1->nbytes));
    EXPECT_EQ(model::load(big.path())->hparams().n_layer, src_layers);
}
