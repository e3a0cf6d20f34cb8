// `cacheblend tokenize`: text to token ids with llama.cpp's test-vector defaults (no BOS/EOS,
// special text as plain text), loading only the vocabulary so llama.cpp's vocab-only GGUFs work.
// Written against the public C ABI: cbl_model_load (vocab_only), cbl_tokenize, cbl_token_to_piece.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>

#include <stdexcept>
#include <vector>

#include "cacheblend.h"
#include "capi-util.h"
#include "commands.h"
#include "json-writer.h"

namespace cacheblend::cli {
namespace {

const command_spec& spec() {
    static const command_spec s{
        "tokenize",
        "tokenize (--text T | --file F) [options]",
        "Print the token ids of a text: space-separated, or {\"ids\": [...]} with --json.",
        {
            model_flag(),
            {"text", "T", "text to tokenize"},
            {"file", "F", "read the text from file F (exact bytes)"},
            {"add-special", "", "add BOS/EOS as the GGUF's add_bos_token/add_eos_token say"},
            {"parse-special", "", "match special-token text such as <|im_start|>"},
            {"pieces", "", "also show each token's bytes"},
            {"json", "", "print a JSON object"},
        },
        0,
        "The model may be a vocabulary-only GGUF (as in llama.cpp's tests).",
    };
    return s;
}

std::string read_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        throw std::runtime_error("cannot read " + path + ": it is a directory");
    }
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
    std::string data;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) data.append(buf, n);
    if (std::ferror(f.get())) {
        throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
    }
    return data;
}

}  // namespace

int run_tokenize(const std::vector<std::string>& args) {
    const parsed_args a = parse_args(spec(), args);
    if (print_help_if_asked(spec(), a)) return 0;
    if (a.has("text") == a.has("file")) {
        throw usage_error("tokenize: give exactly one of --text and --file");
    }
    const bool json = a.has("json");
    const bool pieces = a.has("pieces");

    const std::string text = a.has("text") ? *a.get("text") : read_file(*a.get("file"));
    const std::string model = a.get_or("model", "");
    if (a.has("model") && model.empty()) throw usage_error("--model: empty path");
    cbl_model_params mp;
    cbl_model_params_init(&mp);
    mp.vocab_only = true;
    cbl_model* m_raw = nullptr;
    check(cbl_model_load(model.empty() ? nullptr : model.c_str(), &mp, &m_raw));
    const model_ptr m(m_raw);
    size_t n = 0;
    const bool add = a.has("add-special"), parse = a.has("parse-special");
    check(cbl_tokenize(m.get(), text.data(), text.size(), add, parse, nullptr, 0, &n));
    std::vector<int32_t> ids(n);
    if (n > 0) check(cbl_tokenize(m.get(), text.data(), text.size(), add, parse, ids.data(), n, &n));

    if (json) {
        json_writer w(std::cout);
        w.begin_object();
        w.key("ids").begin_array();
        for (int32_t id : ids) w.value(id);
        w.end_array();
        if (pieces) {
            // A piece can be part of a UTF-8 character; the writer shows such bytes as U+FFFD.
            w.key("pieces").begin_array();
            for (int32_t id : ids) w.value(token_text(m.get(), id));
            w.end_array();
        }
        w.end_object();
        std::cout << "\n";
    } else if (pieces) {
        for (int32_t id : ids) {
            std::printf("%6d  %s\n", id, printable(token_text(m.get(), id)).c_str());
        }
    } else {
        for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
        std::printf("\n");
    }
    return 0;
}

}  // namespace cacheblend::cli
