// Named models (core/model/model-registry.h, cbl_x_model_registry_*): the compiled-in registry
// equals core/model/model-registry.tsv, and a model argument resolves as documented: an existing
// file wins, a registry name means its file in ${XDG_CACHE_HOME}/cacheblend/models, anything else
// is a path, NULL is $CBL_MODEL or qwen2.5-coder-1.5b; a missing file names the fetch command and
// the folder. No real model needed: the cache folder is a temporary one holding a tiny
// vocabulary-only GGUF.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cacheblend.h"
#include "cacheblend_experimental.h"
#include "core/model/model-registry.h"
#include "core/util/xdg-dirs.h"
#include "retrieval/embedder.h"
#include "util/gguf-writer.h"
#include "util/scoped-env.h"
#include "util/test-util.h"

namespace {

namespace fs = std::filesystem;
using cbltest::scoped_env;

// A temporary XDG_CACHE_HOME (models folder created, CBL_MODEL unset) for one test.
class temp_cache {
public:
    temp_cache() {
        char tmpl[] = "/tmp/cbl-registry-XXXXXX";
        const char* d = ::mkdtemp(tmpl);
        if (d) root_ = d;
        fs::create_directories(models());
        xdg_.emplace("XDG_CACHE_HOME", root_.c_str());
        model_env_.emplace("CBL_MODEL", nullptr);
    }
    ~temp_cache() {
        model_env_.reset();
        xdg_.reset();
        std::error_code ec;
        fs::remove_all(root_, ec);
    }
    std::string root() const { return root_; }
    std::string models() const { return root_ + "/cacheblend/models"; }
    std::string file_of(const char* name) const {
        const cacheblend::registry_model* m = cacheblend::find_registry_model(name);
        return m ? models() + "/" + m->file : "";
    }

private:
    std::string root_ = "/tmp/cbl-registry-failed";
    std::optional<scoped_env> xdg_, model_env_;
};

// A vocabulary-only GGUF with n_extra + 3 tokens: loading it proves which file was opened.
void write_vocab_gguf(const std::string& path, int n_extra) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    std::vector<float> scores = {0, 0, 0};
    for (int i = 0; i < n_extra; ++i) {
        tokens.push_back(std::string(1, static_cast<char>('a' + i)));
        types.push_back(1);
        scores.push_back(-1.f - static_cast<float>(i));
    }
    cbltest::gguf_builder b;
    b.set_str("general.architecture", "llama");
    b.set_str("tokenizer.ggml.model", "llama");
    b.set_arr_str("tokenizer.ggml.tokens", tokens);
    b.set_arr_i32("tokenizer.ggml.token_type", types);
    b.set_arr_f32("tokenizer.ggml.scores", scores);
    b.write(path);
}

// Loads vocabulary only; returns the status, *n_vocab and the message on failure.
cbl_status load_vocab(const char* arg, int32_t* n_vocab, std::string* msg) {
    cbl_model_params p;
    cbl_model_params_init(&p);
    p.vocab_only = true;
    cbl_model* m = nullptr;
    const cbl_status s = cbl_model_load(arg, &p, &m);
    *n_vocab = cbl_model_n_vocab(m);
    *msg = s == CBL_OK ? "" : cbl_last_error();
    cbl_model_free(m);
    return s;
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> f;
    size_t i = 0;
    while (i < line.size()) {
        const size_t j = line.find('\t', i);
        if (j != i) f.push_back(line.substr(i, j == std::string::npos ? std::string::npos : j - i));
        if (j == std::string::npos) break;
        i = j + 1;
    }
    return f;
}

bool is_sha256(const std::string& s) {
    return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

// ---------------------------------------------------------------- the registry itself

// The TSV parsed here, independently of the CMake generator, gives the same models in the same
// order; every model has pinned parts with wheel hashes.
TEST(ModelRegistry, MatchesTheTsv) {
    std::ifstream in(CBL_MODEL_REGISTRY_TSV);
    ASSERT_TRUE(in) << CBL_MODEL_REGISTRY_TSV;
    std::vector<std::vector<std::string>> models;
    std::vector<std::string> with_parts;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const auto f = split_tabs(line);
        ASSERT_FALSE(f.empty()) << line;
        if (f[0] == "model") {
            ASSERT_EQ(f.size(), 7u) << line;
            models.push_back(f);
        } else {
            ASSERT_EQ(f[0], "part") << line;
            ASSERT_EQ(f.size(), 5u) << line;
            EXPECT_NE(f[2].find("=="), std::string::npos) << "unpinned: " << line;
            EXPECT_TRUE(is_sha256(f[4])) << line;
            with_parts.push_back(f[1]);
        }
    }
    size_t n = 0;
    const cacheblend::registry_model* reg = cacheblend::model_registry(&n);
    ASSERT_EQ(n, models.size());
    ASSERT_GE(n, 3u);
    for (size_t i = 0; i < n; ++i) {
        const auto& f = models[i];
        SCOPED_TRACE(f[1]);
        EXPECT_EQ(reg[i].name, f[1]);
        EXPECT_EQ(reg[i].file, f[2]);
        EXPECT_EQ(std::to_string(reg[i].bytes), f[3]);
        EXPECT_GT(reg[i].bytes, 0u);
        EXPECT_EQ(reg[i].sha256, f[4]);
        EXPECT_TRUE(is_sha256(reg[i].sha256));
        EXPECT_EQ(reg[i].licence, f[5]);
        EXPECT_EQ(reg[i].description, f[6]);
        EXPECT_NE(std::find(with_parts.begin(), with_parts.end(), f[1]), with_parts.end())
            << "no parts";
        EXPECT_EQ(cacheblend::find_registry_model(f[1]), &reg[i]);
    }
    for (const char* name : {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}) {
        EXPECT_NE(cacheblend::find_registry_model(name), nullptr) << name;
    }
    EXPECT_EQ(cacheblend::find_registry_model("qwen2.5-coder"), nullptr);
    EXPECT_EQ(cacheblend::find_registry_model(""), nullptr);
    EXPECT_EQ(cacheblend::registry_model_names(),
              "smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b");
}

TEST(ModelRegistry, DefaultIsRegistered) {
    const cacheblend::registry_model* d =
        cacheblend::find_registry_model(cacheblend::k_default_model_name);
    ASSERT_NE(d, nullptr);
    EXPECT_STREQ(d->name, "qwen2.5-coder-1.5b");
}

TEST(ModelRegistry, CApiListsTheRegistry) {
    size_t n = 0;
    const cacheblend::registry_model* reg = cacheblend::model_registry(&n);
    ASSERT_EQ(cbl_x_model_registry_count(), n);
    int defaults = 0;
    for (size_t i = 0; i < n; ++i) {
        cbl_x_registry_model m;
        cbl_x_registry_model_init(&m);
        ASSERT_EQ(cbl_x_model_registry_get(i, &m), CBL_OK) << cbl_last_error();
        EXPECT_STREQ(m.name, reg[i].name);
        EXPECT_STREQ(m.file, reg[i].file);
        EXPECT_EQ(m.bytes, reg[i].bytes);
        EXPECT_STREQ(m.sha256, reg[i].sha256);
        EXPECT_STREQ(m.licence, reg[i].licence);
        EXPECT_STREQ(m.description, reg[i].description);
        EXPECT_EQ(m.is_default, std::string(m.name) == "qwen2.5-coder-1.5b");
        defaults += m.is_default;
    }
    EXPECT_EQ(defaults, 1);

    cbl_x_registry_model m;
    cbl_x_registry_model_init(&m);
    EXPECT_EQ(cbl_x_model_registry_get(n, &m), CBL_RANGE);
    EXPECT_TRUE(contains(cbl_last_error(), "past the last"));
    EXPECT_EQ(cbl_x_model_registry_get(0, nullptr), CBL_INVALID_ARG);
    m.struct_size = 0;
    EXPECT_EQ(cbl_x_model_registry_get(0, &m), CBL_INVALID_ARG);
    // An older caller's smaller struct gets only the fields it has.
    cbl_x_registry_model old{};
    old.struct_size = offsetof(cbl_x_registry_model, bytes);
    ASSERT_EQ(cbl_x_model_registry_get(0, &old), CBL_OK);
    EXPECT_STREQ(old.name, reg[0].name);
    EXPECT_EQ(old.bytes, 0u);
    EXPECT_EQ(old.struct_size, offsetof(cbl_x_registry_model, bytes));

    char* s = nullptr;
    EXPECT_EQ(cbl_x_model_path(nullptr, nullptr), CBL_INVALID_ARG);
    EXPECT_EQ(cbl_x_model_cache_dir(nullptr), CBL_INVALID_ARG);
    ASSERT_EQ(cbl_x_model_cache_dir(&s), CBL_OK);
    EXPECT_EQ(std::string(s), cacheblend::model_cache_dir());
    cbl_free(s);
}

// ---------------------------------------------------------------- resolution

TEST(ModelResolve, CacheFolderFollowsXdgAndHome) {
    temp_cache c;
    EXPECT_EQ(cacheblend::model_cache_dir(), c.models());
    scoped_env no_xdg("XDG_CACHE_HOME", nullptr);
    scoped_env home("HOME", "/home/someone");
    EXPECT_EQ(cacheblend::model_cache_dir(), "/home/someone/.cache/cacheblend/models");
}

// One XDG rule for every default folder (core/util/xdg-dirs.h): models, the embedder, the CLI's
// KV store and the data directory follow the same variables and fallbacks.
TEST(ModelResolve, EveryDefaultFolderFollowsTheSameXdgRule) {
    scoped_env cache("XDG_CACHE_HOME", "/x/cache");
    scoped_env data("XDG_DATA_HOME", "/x/data");
    scoped_env embed("CBL_EMBED_MODEL", nullptr);
    EXPECT_EQ(cacheblend::xdg_cache_dir(), "/x/cache/cacheblend");
    EXPECT_EQ(cacheblend::xdg_data_dir(), "/x/data/cacheblend");
    EXPECT_EQ(cacheblend::model_cache_dir(), "/x/cache/cacheblend/models");
    EXPECT_EQ(cacheblend::default_embedder_path().rfind("/x/cache/cacheblend/models/", 0), 0u);
    char* s = nullptr;
    ASSERT_EQ(cbl_x_default_kv_store_dir(&s), CBL_OK);
    EXPECT_STREQ(s, "/x/cache/cacheblend/kv");
    cbl_free(s);
    EXPECT_EQ(cbl_x_default_kv_store_dir(nullptr), CBL_INVALID_ARG);
    {
        // Empty variables count as unset (the spec), then HOME, then /tmp.
        scoped_env empty_cache("XDG_CACHE_HOME", "");
        scoped_env no_data("XDG_DATA_HOME", nullptr);
        scoped_env home("HOME", "/home/someone");
        EXPECT_EQ(cacheblend::xdg_cache_dir(), "/home/someone/.cache/cacheblend");
        EXPECT_EQ(cacheblend::xdg_data_dir(), "/home/someone/.local/share/cacheblend");
        scoped_env no_home("HOME", nullptr);
        EXPECT_EQ(cacheblend::xdg_cache_dir(), "/tmp/cacheblend");
        EXPECT_EQ(cacheblend::xdg_data_dir(), "/tmp/cacheblend");
    }
}

TEST(ModelResolve, PresentNameLoadsItsCacheFile) {
    temp_cache c;
    write_vocab_gguf(c.file_of("qwen2.5-coder-0.5b"), 4);
    const cacheblend::model_ref r = cacheblend::resolve_model("qwen2.5-coder-0.5b");
    EXPECT_EQ(r.path, c.file_of("qwen2.5-coder-0.5b"));
    ASSERT_NE(r.named, nullptr);
    EXPECT_STREQ(r.named->name, "qwen2.5-coder-0.5b");
    EXPECT_FALSE(r.is_default);

    int32_t n_vocab = 0;
    std::string msg;
    ASSERT_EQ(load_vocab("qwen2.5-coder-0.5b", &n_vocab, &msg), CBL_OK) << msg;
    EXPECT_EQ(n_vocab, 7);

    char* s = nullptr;
    ASSERT_EQ(cbl_x_model_path("qwen2.5-coder-0.5b", &s), CBL_OK);
    EXPECT_EQ(std::string(s), c.file_of("qwen2.5-coder-0.5b"));
    cbl_free(s);
}

TEST(ModelResolve, MissingNameNamesTheFetchCommandAndFolder) {
    temp_cache c;
    int32_t n_vocab = -1;
    std::string msg;
    EXPECT_EQ(load_vocab("smollm2-135m", &n_vocab, &msg), CBL_IO);
    EXPECT_EQ(n_vocab, 0);
    EXPECT_TRUE(contains(msg, "cacheblend-fetch-model smollm2-135m")) << msg;
    EXPECT_TRUE(contains(msg, c.models())) << msg;
    EXPECT_TRUE(contains(msg, "model 'smollm2-135m' is not downloaded")) << msg;
    EXPECT_FALSE(contains(msg, "default")) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;

    // Through the runtime too (cbl_runtime_params.model_path).
    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.model_path = "qwen2.5-coder-0.5b";
    const std::string data = c.root() + "/data";
    rp.data_dir = data.c_str();
    rp.no_embedder = true;
    cbl_runtime* rt = reinterpret_cast<cbl_runtime*>(0x1);
    EXPECT_EQ(cbl_runtime_open(&rp, &rt), CBL_IO);
    EXPECT_EQ(rt, nullptr);
    EXPECT_TRUE(contains(cbl_last_error(), "cacheblend-fetch-model qwen2.5-coder-0.5b"))
        << cbl_last_error();
}

TEST(ModelResolve, DefaultIsQwenCoder15bUnlessCblModelIsSet) {
    temp_cache c;
    cacheblend::model_ref r = cacheblend::resolve_model("");
    EXPECT_TRUE(r.is_default);
    EXPECT_FALSE(r.from_env);
    EXPECT_EQ(r.arg, "qwen2.5-coder-1.5b");
    EXPECT_EQ(r.path, c.file_of("qwen2.5-coder-1.5b"));

    int32_t n_vocab = 0;
    std::string msg;
    EXPECT_EQ(load_vocab(nullptr, &n_vocab, &msg), CBL_IO);
    EXPECT_TRUE(contains(msg, "cacheblend-fetch-model qwen2.5-coder-1.5b")) << msg;
    EXPECT_TRUE(contains(msg, "the default model")) << msg;
    EXPECT_TRUE(contains(msg, "CBL_MODEL")) << msg;
    EXPECT_EQ(load_vocab("", &n_vocab, &msg), CBL_IO);
    EXPECT_TRUE(contains(msg, "cacheblend-fetch-model qwen2.5-coder-1.5b")) << msg;

    char* s = nullptr;
    ASSERT_EQ(cbl_x_default_model_path(&s), CBL_OK);
    EXPECT_EQ(std::string(s), c.file_of("qwen2.5-coder-1.5b"));
    cbl_free(s);
    ASSERT_EQ(cbl_x_model_path(nullptr, &s), CBL_OK);
    EXPECT_EQ(std::string(s), c.file_of("qwen2.5-coder-1.5b"));
    cbl_free(s);

    // CBL_MODEL as a name: the cache file of that name.
    write_vocab_gguf(c.file_of("smollm2-135m"), 2);
    {
        scoped_env env("CBL_MODEL", "smollm2-135m");
        r = cacheblend::resolve_model("");
        EXPECT_TRUE(r.from_env);
        EXPECT_EQ(r.path, c.file_of("smollm2-135m"));
        ASSERT_EQ(load_vocab(nullptr, &n_vocab, &msg), CBL_OK) << msg;
        EXPECT_EQ(n_vocab, 5);
        // An explicit argument still wins over CBL_MODEL.
        EXPECT_EQ(load_vocab("qwen2.5-coder-0.5b", &n_vocab, &msg), CBL_IO);
    }
    // CBL_MODEL as a path.
    const std::string other = c.root() + "/other.gguf";
    write_vocab_gguf(other, 1);
    {
        scoped_env env("CBL_MODEL", other.c_str());
        EXPECT_EQ(cacheblend::resolve_model("").path, other);
        ASSERT_EQ(load_vocab(nullptr, &n_vocab, &msg), CBL_OK) << msg;
        EXPECT_EQ(n_vocab, 4);
    }
    // CBL_MODEL naming nothing: the not-found error says where the value came from.
    {
        scoped_env env("CBL_MODEL", "no-such-model");
        EXPECT_EQ(load_vocab(nullptr, &n_vocab, &msg), CBL_IO);
        EXPECT_TRUE(contains(msg, "model file not found: no-such-model (from CBL_MODEL)")) << msg;
    }
}

// A file of the registry name in the working directory is loaded instead of the cache file.
TEST(ModelResolve, ExistingFileWinsOverAName) {
    temp_cache c;
    write_vocab_gguf(c.file_of("smollm2-135m"), 2);
    const fs::path cwd = fs::current_path();
    const std::string work = c.root() + "/work";
    fs::create_directories(work);
    ASSERT_EQ(::chdir(work.c_str()), 0);
    write_vocab_gguf(work + "/smollm2-135m", 6);
    int32_t n_vocab = 0;
    std::string msg;
    const cbl_status s = load_vocab("smollm2-135m", &n_vocab, &msg);
    const cacheblend::model_ref r = cacheblend::resolve_model("smollm2-135m");
    // A directory of that name does not hide the model.
    fs::remove(work + "/smollm2-135m");
    fs::create_directories(work + "/smollm2-135m");
    const cacheblend::model_ref dir_ref = cacheblend::resolve_model("smollm2-135m");
    ASSERT_EQ(::chdir(cwd.c_str()), 0);

    ASSERT_EQ(s, CBL_OK) << msg;
    EXPECT_EQ(n_vocab, 9);
    EXPECT_EQ(r.path, "smollm2-135m");
    EXPECT_EQ(r.named, nullptr);
    EXPECT_EQ(dir_ref.path, c.file_of("smollm2-135m"));

    // A real path loads as before, whatever the registry holds.
    const std::string path = c.root() + "/mine.gguf";
    write_vocab_gguf(path, 3);
    ASSERT_EQ(load_vocab(path.c_str(), &n_vocab, &msg), CBL_OK) << msg;
    EXPECT_EQ(n_vocab, 6);
}

// Not a file and not a name: a path that is not there, with the names listed for a bare word.
TEST(ModelResolve, UnknownNameIsAMissingPath) {
    temp_cache c;
    int32_t n_vocab = 0;
    std::string msg;
    EXPECT_EQ(load_vocab("qwen-1.5b", &n_vocab, &msg), CBL_IO);
    EXPECT_TRUE(contains(msg, "model file not found: qwen-1.5b")) << msg;
    EXPECT_TRUE(contains(msg, "not a model name either")) << msg;
    EXPECT_TRUE(contains(msg, "qwen2.5-coder-1.5b")) << msg;
    EXPECT_FALSE(contains(msg, "fetch-model")) << msg;

    const std::string missing = c.root() + "/nope.gguf";
    EXPECT_EQ(load_vocab(missing.c_str(), &n_vocab, &msg), CBL_IO);
    EXPECT_TRUE(contains(msg, "model file not found: " + missing)) << msg;
    EXPECT_FALSE(contains(msg, "model name")) << msg;  // a path: no list of names

    EXPECT_EQ(load_vocab(c.root().c_str(), &n_vocab, &msg), CBL_IO);
    EXPECT_TRUE(contains(msg, "is a directory")) << msg;
}

// ---------------------------------------------------------------- unsupported quant types

// An IQ quant (ggml type id 16, IQ2_XXS) through the public API: a clean CBL_UNSUPPORTED (a valid
// file we cannot run) naming the file, the tensor, the type and what is supported.
TEST(ModelResolve, UnsupportedQuantTypeIsAClearError) {
    temp_cache c;
    const std::string path = c.root() + "/iq2.gguf";
    cbltest::gguf_builder b;
    b.set_str("general.architecture", "llama");
    b.add_tensor_raw("blk.0.attn_q.weight", 16, {256, 2}, std::vector<uint8_t>(132, 0));
    b.write(path);
    cbl_model* m = reinterpret_cast<cbl_model*>(0x1);
    EXPECT_EQ(cbl_model_load(path.c_str(), nullptr, &m), CBL_UNSUPPORTED);
    EXPECT_EQ(m, nullptr);
    const std::string msg = cbl_last_error();
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, "tensor 'blk.0.attn_q.weight'")) << msg;
    EXPECT_TRUE(contains(msg, "ggml type iq2_xxs (id 16")) << msg;
    EXPECT_TRUE(contains(msg, "weights must be one of: f32 f16 q4_0 q4_1")) << msg;
}
