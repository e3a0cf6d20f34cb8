// End-to-end tests of the `cacheblend` command-line tool: runs <build>/bin/cacheblend (found next
// to this test binary, <build>/tests/) and checks exit codes, error lines and the fixed JSON field
// names (docs/ARCHITECTURE.md, 'Command-line tool') against the library called in-process.
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/prompt/chat-template.h"
#include "util/cli-runner.h"
#include "util/test-util.h"

namespace {

// ---- a tiny JSON parser: enough to validate the CLI's output and read its fields ----

struct jvalue {
    enum kind_t { null_v, bool_v, number_v, string_v, array_v, object_v } kind = null_v;
    bool b = false;
    double num = 0;
    std::string str;
    std::vector<jvalue> arr;
    std::vector<std::pair<std::string, jvalue>> obj;

    const jvalue* get(const std::string& k) const {
        for (const auto& [key, v] : obj) {
            if (key == k) return &v;
        }
        return nullptr;
    }
};

class json_parser {
public:
    explicit json_parser(const std::string& s) : s_(s) {}

    // Parses one value followed only by whitespace; false on any syntax error.
    bool parse(jvalue& out) {
        if (!value(out, 0)) return false;
        ws();
        return i_ == s_.size();
    }

private:
    void ws() {
        while (i_ < s_.size() &&
               (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
            ++i_;
    }
    bool lit(const char* w) {
        const std::string t(w);
        if (s_.compare(i_, t.size(), t) != 0) return false;
        i_ += t.size();
        return true;
    }
    static void put_utf8(uint32_t cp, std::string& out) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }
    bool hex4(uint32_t& v) {
        if (i_ + 4 > s_.size()) return false;
        v = 0;
        for (int k = 0; k < 4; ++k) {
            const char c = s_[i_++];
            v <<= 4;
            if (c >= '0' && c <= '9')
                v |= static_cast<uint32_t>(c - '0');
            else if (c >= 'a' && c <= 'f')
                v |= static_cast<uint32_t>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                v |= static_cast<uint32_t>(c - 'A' + 10);
            else
                return false;
        }
        return true;
    }
    bool string(std::string& out) {
        if (i_ >= s_.size() || s_[i_] != '"') return false;
        ++i_;
        while (i_ < s_.size()) {
            const unsigned char c = static_cast<unsigned char>(s_[i_++]);
            if (c == '"') return true;
            if (c < 0x20) return false;  // raw control characters are invalid JSON
            if (c != '\\') {
                out += static_cast<char>(c);
                continue;
            }
            if (i_ >= s_.size()) return false;
            const char e = s_[i_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    uint32_t cp = 0;
                    if (!hex4(cp)) return false;
                    if (cp >= 0xD800 && cp < 0xDC00) {
                        uint32_t lo = 0;
                        if (!lit("\\u") || !hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                        return false;
                    }
                    put_utf8(cp, out);
                    break;
                }
                default: return false;
            }
        }
        return false;
    }
    bool number(double& out) {
        const size_t start = i_;
        if (i_ < s_.size() && s_[i_] == '-') ++i_;
        const size_t digits = i_;
        while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
        if (i_ == digits || (s_[digits] == '0' && i_ - digits > 1)) return false;
        if (i_ < s_.size() && s_[i_] == '.') {
            const size_t f = ++i_;
            while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
            if (i_ == f) return false;
        }
        if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
            ++i_;
            if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
            const size_t e = i_;
            while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
            if (i_ == e) return false;
        }
        out = std::strtod(s_.substr(start, i_ - start).c_str(), nullptr);
        return true;
    }
    bool value(jvalue& v, int depth) {
        if (depth > 64) return false;
        ws();
        if (i_ >= s_.size()) return false;
        const char c = s_[i_];
        if (c == '{') {
            v.kind = jvalue::object_v;
            ++i_;
            ws();
            if (i_ < s_.size() && s_[i_] == '}') {
                ++i_;
                return true;
            }
            while (true) {
                ws();
                std::string k;
                if (!string(k)) return false;
                ws();
                if (i_ >= s_.size() || s_[i_++] != ':') return false;
                jvalue item;
                if (!value(item, depth + 1)) return false;
                v.obj.emplace_back(std::move(k), std::move(item));
                ws();
                if (i_ >= s_.size()) return false;
                if (s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                if (s_[i_] == '}') {
                    ++i_;
                    return true;
                }
                return false;
            }
        }
        if (c == '[') {
            v.kind = jvalue::array_v;
            ++i_;
            ws();
            if (i_ < s_.size() && s_[i_] == ']') {
                ++i_;
                return true;
            }
            while (true) {
                jvalue item;
                if (!value(item, depth + 1)) return false;
                v.arr.push_back(std::move(item));
                ws();
                if (i_ >= s_.size()) return false;
                if (s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                if (s_[i_] == ']') {
                    ++i_;
                    return true;
                }
                return false;
            }
        }
        if (c == '"') {
            v.kind = jvalue::string_v;
            return string(v.str);
        }
        if (lit("true")) {
            v.kind = jvalue::bool_v;
            v.b = true;
            return true;
        }
        if (lit("false")) {
            v.kind = jvalue::bool_v;
            return true;
        }
        if (lit("null")) {
            v.kind = jvalue::null_v;
            return true;
        }
        v.kind = jvalue::number_v;
        return number(v.num);
    }

    const std::string& s_;
    size_t i_ = 0;
};

// Strict UTF-8 check (no overlongs, surrogates or code points above U+10FFFF).
bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
        const unsigned char c = b(i);
        size_t n = 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            ++i;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            n = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            lo = c == 0xE0 ? 0xA0 : 0x80;
            hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            lo = c == 0xF0 ? 0x90 : 0x80;
            hi = c == 0xF4 ? 0x8F : 0xBF;
        } else
            return false;
        for (size_t k = 1; k <= n; ++k) {
            if (i + k >= s.size()) return false;
            const unsigned char x = b(i + k);
            if (x < (k == 1 ? lo : 0x80) || x > (k == 1 ? hi : 0xBF)) return false;
        }
        i += n + 1;
    }
    return true;
}

// Output must be valid UTF-8 and valid JSON.
bool parse_json(const std::string& s, jvalue& out) {
    return valid_utf8(s) && json_parser(s).parse(out);
}

std::vector<int32_t> int_array(const jvalue* v) {
    std::vector<int32_t> out;
    if (!v || v->kind != jvalue::array_v) return out;
    for (const jvalue& x : v->arr) out.push_back(static_cast<int32_t>(x.num));
    return out;
}

// ---- running the CLI ----

std::string temp_path(const std::string& name) {
    return testing::TempDir() + "cbl_test_cli_" + std::to_string(::getpid()) + "_" + name;
}

using run_result = cbltest::cli_result;
using cbltest::cli_path;
using cbltest::read_all;

run_result run_cli(const std::vector<std::string>& args) {
    return cbltest::run_cli(args, temp_path("stderr"));
}

std::string describe(const run_result& r) {
    return "exit " + std::to_string(r.exit_code) + " signal " + std::to_string(r.signal) +
           "\nstdout: " + r.out.substr(0, 2000) + "\nstderr: " + r.err.substr(0, 2000);
}

// A usage or runtime failure: the given exit code, no crash, exactly one error line.
void expect_clean_error(const run_result& r, int code, const std::string& needle = "") {
    EXPECT_EQ(r.signal, 0) << describe(r);
    EXPECT_EQ(r.exit_code, code) << describe(r);
    const auto lines = r.err_lines();
    ASSERT_EQ(lines.size(), 1u) << describe(r);
    EXPECT_EQ(lines[0].rfind("cacheblend: error: ", 0), 0u) << lines[0];
    if (!needle.empty()) { EXPECT_NE(lines[0].find(needle), std::string::npos) << lines[0]; }
}

#define CBL_REQUIRE_CLI() \
    if (!cbltest::file_exists(cli_path())) { GTEST_SKIP() << "CLI not built: " << cli_path(); }

// ---- tests ----

TEST(Cli, HelpAndVersion) {
    CBL_REQUIRE_CLI();
    run_result r = run_cli({"--help"});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    for (const char* c : {"generate", "tokenize", "bench", "blend", "ask", "eval"}) {
        EXPECT_NE(r.out.find(c), std::string::npos) << c;
    }
    r = run_cli({"--version"});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.out.rfind("cacheblend ", 0), 0u) << r.out;
    for (const char* c : {"generate", "tokenize", "bench"}) {
        r = run_cli({c, "--help"});
        EXPECT_EQ(r.exit_code, 0) << describe(r);
        EXPECT_NE(r.out.find("usage: cacheblend " + std::string(c)), std::string::npos) << r.out;
    }
}

TEST(Cli, UsageErrorsExit2) {
    CBL_REQUIRE_CLI();
    expect_clean_error(run_cli({}), 2, "no command");
}

TEST(Cli, BadFlagsExit2WithOneLine) {
    CBL_REQUIRE_CLI();
    expect_clean_error(run_cli({"tokenize", "--bogus", "--text", "x"}), 2, "--bogus");
    expect_clean_error(run_cli({"generate", "--prompt", "hi", "--max-tokens", "12x"}), 2,
                       "--max-tokens");
    expect_clean_error(run_cli({"generate", "--prompt=hi", "--temp=-1"}), 2, "--temp");
    expect_clean_error(run_cli({"generate", "--max-tokens"}), 2, "needs a value");
    expect_clean_error(run_cli({"generate", "--json"}), 2, "--prompt");
    expect_clean_error(run_cli({"tokenize", "--json=yes", "--text", "x"}), 2);
    expect_clean_error(run_cli({"bench", "sideways"}), 2, "sideways");
    expect_clean_error(run_cli({"bench", "prefill", "--tokens", "128,,4"}), 2, "--tokens");
    expect_clean_error(run_cli({"frobnicate"}), 2, "frobnicate");
    expect_clean_error(run_cli({"ask", "--model", "x"}), 2, "QUESTION");
    expect_clean_error(run_cli({"ask", "--model", "x", "q"}), 2, "--data");
    expect_clean_error(run_cli({"ask", "--data", "d", "q", "--mode", "sideways"}), 2, "--mode");
}

// Mode, search and KV-format words come from the library's one table (cbl_enum_parse): a wrong
// word is a usage error listing the library's words, and --help shows the same words.
TEST(Cli, EnumFlagsUseTheLibrarysNames) {
    CBL_REQUIRE_CLI();
    run_result r = run_cli({"ask", "--data", "d", "q", "--mode", "Blend"});
    expect_clean_error(r, 2, "full, prefix, reuse, blend");
    expect_clean_error(run_cli({"search", "--data", "d", "q", "--mode", "fts"}), 2,
                       "hybrid, dense, bm25");
    expect_clean_error(run_cli({"ask", "--data", "d", "q", "--search", "fts"}), 2, "--search");
    expect_clean_error(run_cli(
                           {"blend", "--question", "q", "--chunk", "c.txt", "--kv-format", "f32"}),
                       2, "f16, q8, exact");
    expect_clean_error(run_cli({"eval", "--dataset", "x.json", "--modes", "full,mixed"}), 2,
                       "'mixed'");
    r = run_cli({"ask", "--help"});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_NE(r.out.find("full, prefix, reuse or blend (default blend)"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("hybrid, dense or bm25 (default hybrid)"), std::string::npos) << r.out;
}

// --device on the commands that make their own session (ask and ingest take it through the
// runtime): an unknown or absent device is a one-line error naming it, exit 1; an empty one is a
// usage error.
TEST(Cli, DeviceFlagNamesTheDeviceItCannotUse) {
    CBL_REQUIRE_CLI();
    CBL_REQUIRE_DEFAULT_MODEL(model);
    expect_clean_error(run_cli(
                           {"generate", "--model", model, "--prompt", "hi", "--device", "tpu:0"}),
                       1, "device 'tpu:0'");
    expect_clean_error(run_cli({"bench", "decode", "--model", model, "--tokens", "4", "--device",
                                "cuda:9"}),
                       1, "device 'cuda:9'");
    expect_clean_error(run_cli({"generate", "--prompt", "hi", "--device="}), 2, "--device");
    const run_result r =
        run_cli({"generate", "--model", model, "--prompt", "The capital of France is",
                 "--max-tokens", "2", "--device", "cpu", "--json"});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
}

TEST(Cli, MissingModelExits1) {
    CBL_REQUIRE_CLI();
    const std::string missing = temp_path("does-not-exist.gguf");
    expect_clean_error(run_cli({"tokenize", "--model", missing, "--text", "hi"}), 1, missing);
    expect_clean_error(run_cli({"generate", "--model", missing, "--prompt", "hi"}), 1, "not found");
}

TEST(Cli, TruncatedGgufGivesCleanError) {
    CBL_REQUIRE_CLI();
    CBL_REQUIRE_DEFAULT_MODEL(model_path);
    const std::string full = read_all(model_path);
    ASSERT_GT(full.size(), 1u << 20);
    const std::string trunc = temp_path("truncated.gguf");
    // Cut inside the magic, the header, the metadata (tokenizer arrays), and the tensor data.
    for (size_t len : {size_t(0), size_t(3), size_t(20), size_t(4096), size_t(600000),
                       full.size() / 2, full.size() - 1}) {
        {
            std::ofstream o(trunc, std::ios::binary | std::ios::trunc);
            o.write(full.data(), static_cast<std::streamsize>(len));
        }
        SCOPED_TRACE("truncated to " + std::to_string(len) + " bytes");
        expect_clean_error(
            run_cli({"generate", "--model", trunc, "--prompt", "hi", "--max-tokens", "2"}), 1);
        if (len <= 600000) {
            expect_clean_error(run_cli({"tokenize", "--model", trunc, "--text", "hi"}), 1);
        }
    }
    std::remove(trunc.c_str());
}

TEST(Cli, TokenizeJsonMatchesLibrary) {
    CBL_REQUIRE_CLI();
    CBL_REQUIRE_DEFAULT_MODEL(model_path);
    cacheblend::model_load_params lp;
    lp.vocab_only = true;
    const auto m = cacheblend::model::load(model_path, lp);
    const std::string text = "Hello world! Ünïcödé 123  \n\t<|im_start|>x \xF0\x9F\x98\x80";

    struct variant {
        std::vector<std::string> flags;
        bool add_special, parse_special;
    };
    for (const variant& v : {variant{{}, false, false}, variant{{"--parse-special"}, false, true},
                             variant{{"--add-special", "--parse-special"}, true, true}}) {
        std::vector<std::string> args = {"tokenize", "--model", model_path,
                                         "--text",   text,      "--json"};
        args.insert(args.end(), v.flags.begin(), v.flags.end());
        const run_result r = run_cli(args);
        ASSERT_EQ(r.exit_code, 0) << describe(r);
        jvalue j;
        ASSERT_TRUE(parse_json(r.out, j)) << r.out;
        ASSERT_EQ(j.kind, jvalue::object_v);
        const std::vector<int32_t> ids = int_array(j.get("ids"));
        EXPECT_EQ(ids, m->vocab().encode(text, v.add_special, v.parse_special)) << r.out;
    }

    // --file reads exact bytes; human output is space-separated ids.
    const std::string file = temp_path("text.txt");
    {
        std::ofstream o(file, std::ios::binary);
        o << text;
    }
    const run_result r = run_cli({"tokenize", "--model", model_path, "--file", file});
    std::remove(file.c_str());
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    std::string expected;
    for (int32_t id : m->vocab().encode(text, false, false)) {
        expected += (expected.empty() ? "" : " ") + std::to_string(id);
    }
    EXPECT_EQ(r.out, expected + "\n");
}

TEST(Cli, TokenizePiecesAreValidJson) {
    CBL_REQUIRE_CLI();
    CBL_REQUIRE_DEFAULT_MODEL(model_path);
    // Byte-level BPE splits rare characters into tokens holding partial UTF-8 sequences; the JSON
    // writer must still emit valid UTF-8 (U+FFFD for those bytes).
    const std::string text = "\xF0\x9F\xA6\x99\xE2\x80\x8B \xE4\xB8\xAD\xE6\x96\x87 \"q\" \\ \x01";
    const run_result r =
        run_cli({"tokenize", "--model", model_path, "--text", text, "--pieces", "--json"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    jvalue j;
    ASSERT_TRUE(parse_json(r.out, j)) << r.out;
    ASSERT_NE(j.get("pieces"), nullptr);
    EXPECT_EQ(j.get("pieces")->arr.size(), int_array(j.get("ids")).size());
    std::string joined;
    for (const jvalue& p : j.get("pieces")->arr) joined += p.str;
    EXPECT_NE(joined.find("\"q\" \\ \x01"), std::string::npos) << joined;
}

void check_generate_json(const run_result& r, const std::vector<int32_t>& expected_prompt,
                         int max_tokens, int k) {
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    jvalue j;
    ASSERT_TRUE(parse_json(r.out, j)) << "not valid JSON: " << r.out;
    ASSERT_EQ(j.kind, jvalue::object_v);
    for (const char* f : {"text", "tokens", "prompt_tokens", "top_logprobs", "stats"}) {
        ASSERT_NE(j.get(f), nullptr) << "missing field " << f << " in " << r.out;
    }
    EXPECT_EQ(j.get("text")->kind, jvalue::string_v);
    const std::vector<int32_t> tokens = int_array(j.get("tokens"));
    EXPECT_LE(tokens.size(), static_cast<size_t>(max_tokens));
    EXPECT_EQ(int_array(j.get("prompt_tokens")), expected_prompt);

    const jvalue& stats = *j.get("stats");
    ASSERT_EQ(stats.kind, jvalue::object_v);
    for (const char* f : {"prefill_ms", "prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms",
                          "prompt_tokens", "generated_tokens"}) {
        ASSERT_NE(stats.get(f), nullptr) << "missing stats." << f;
        EXPECT_EQ(stats.get(f)->kind, jvalue::number_v) << f;
        EXPECT_GE(stats.get(f)->num, 0) << f;
    }
    ASSERT_NE(stats.get("stop_reason"), nullptr);
    const std::string stop = stats.get("stop_reason")->str;
    EXPECT_TRUE(stop == "eog" || stop == "length") << stop;
    EXPECT_EQ(stats.get("prompt_tokens")->num, static_cast<double>(expected_prompt.size()));
    EXPECT_EQ(stats.get("generated_tokens")->num, static_cast<double>(tokens.size()));
    EXPECT_GT(stats.get("prefill_ms")->num, 0);

    const jvalue& lps = *j.get("top_logprobs");
    ASSERT_EQ(lps.kind, jvalue::array_v);
    ASSERT_EQ(lps.arr.size(), static_cast<size_t>(k));
    double prev = 0;
    for (size_t i = 0; i < lps.arr.size(); ++i) {
        const jvalue& e = lps.arr[i];
        ASSERT_EQ(e.kind, jvalue::object_v);
        ASSERT_NE(e.get("id"), nullptr);
        ASSERT_NE(e.get("text"), nullptr);
        ASSERT_NE(e.get("logprob"), nullptr);
        EXPECT_EQ(e.get("text")->kind, jvalue::string_v);
        const double lp = e.get("logprob")->num;
        EXPECT_LE(lp, 0.0);
        if (i > 0) { EXPECT_LE(lp, prev) << "top_logprobs not sorted descending at " << i; }
        prev = lp;
    }
    // Greedy: the first generated token is the most likely one.
    if (!tokens.empty()) { EXPECT_EQ(tokens[0], static_cast<int32_t>(lps.arr[0].get("id")->num)); }
}

TEST(Cli, GenerateJson) {
    CBL_REQUIRE_CLI();
    CBL_REQUIRE_DEFAULT_MODEL(model_path);
    cacheblend::model_load_params lp;
    lp.vocab_only = true;
    const auto m = cacheblend::model::load(model_path, lp);
    const std::string prompt = "The capital of France is";
    const run_result r = run_cli({"generate", "--model", model_path, "--prompt", prompt, "--json",
                                  "--max-tokens", "8", "--top-logprobs", "5", "--threads", "1"});
    check_generate_json(r, m->vocab().encode(prompt, true, false), 8, 5);
}

TEST(Cli, GenerateChatJson) {
    CBL_REQUIRE_CLI();
    CBL_REQUIRE_DEFAULT_MODEL(model_path);
    cacheblend::model_load_params lp;
    lp.vocab_only = true;
    const auto m = cacheblend::model::load(model_path, lp);
    const std::string question = "What is 2+2?";
    const std::string system = "You are terse.";
    const std::string rendered =
        cacheblend::render_chat(m->chat(), {{"system", system}, {"user", question}}, true);
    const run_result r =
        run_cli({"generate", "--model", model_path, "--chat", "--system", system, "--prompt",
                 question, "--json", "--max-tokens", "4", "--top-logprobs", "3", "--threads=1"});
    check_generate_json(r, m->vocab().encode(rendered, true, true), 4, 3);
}

TEST(Cli, GenerateHumanStreamsAndPrintsStats) {
    CBL_REQUIRE_CLI();
    CBL_REQUIRE_DEFAULT_MODEL(model_path);
    const run_result json =
        run_cli({"generate", "--model", model_path, "--prompt", "Once upon a time", "--max-tokens",
                 "6", "--json", "--threads", "1"});
    ASSERT_EQ(json.exit_code, 0) << describe(json);
    jvalue j;
    ASSERT_TRUE(parse_json(json.out, j));
    const run_result r = run_cli({"generate", "--model", model_path, "--prompt", "Once upon a time",
                                  "--max-tokens", "6", "--threads", "1"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    // Greedy runs agree; stdout is the answer (JSON shows invalid UTF-8 as U+FFFD, so compare the
    // ASCII-only case only).
    const std::string text = j.get("text")->str;
    bool ascii = true;
    for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (ascii) { EXPECT_EQ(r.out, text + (text.empty() || text.back() != '\n' ? "\n" : "")); }
    EXPECT_NE(r.err.find("prefill"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
}

TEST(Cli, BenchJson) {
    CBL_REQUIRE_CLI();
    CBL_REQUIRE_DEFAULT_MODEL(model_path);
    for (const char* kind : {"prefill", "decode"}) {
        const run_result r = run_cli({"bench", kind, "--model", model_path, "--tokens", "4,8",
                                      "--reps", "1", "--threads", "1", "--json"});
        ASSERT_EQ(r.exit_code, 0) << describe(r);
        jvalue j;
        ASSERT_TRUE(parse_json(r.out, j)) << r.out;
        ASSERT_EQ(j.kind, jvalue::array_v);
        ASSERT_EQ(j.arr.size(), 2u);
        for (size_t i = 0; i < 2; ++i) {
            const jvalue& row = j.arr[i];
            ASSERT_NE(row.get("kind"), nullptr);
            EXPECT_EQ(row.get("kind")->str, kind);
            ASSERT_NE(row.get("tokens"), nullptr);
            EXPECT_EQ(row.get("tokens")->num, i == 0 ? 4 : 8);
            ASSERT_NE(row.get("threads"), nullptr);
            EXPECT_EQ(row.get("threads")->num, 1);
            ASSERT_NE(row.get("tokens_per_s"), nullptr);
            EXPECT_GT(row.get("tokens_per_s")->num, 0);
        }
    }
}

}  // namespace
