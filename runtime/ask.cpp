// The request path: retrieve, assemble the prompt within the context, answer on the session,
// record the chunks' KV keys (docs/ARCHITECTURE.md, 'Ask path').
#include <algorithm>
#include <chrono>
#include <utility>

#include "core/prompt/rag-prompt.h"
#include "core/util/error.h"
#include "core/util/text.h"
#include "runtime/rag-runtime.h"

namespace cacheblend {
namespace {

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

void append_notice(std::string* to, const std::string& what) {
    if (what.empty()) return;
    if (!to->empty()) *to += "; ";
    *to += what;
}

}  // namespace

ask_result rag_runtime::ask(rag_session& s, const std::string& question, const ask_params& p,
                            const token_callback& on_token) {
    s.begin_request();
    if (is_blank(question)) throw error(status::invalid_arg, "ask: the question is empty");
    if (llm_.get() != &s.get_model()) {
        throw error(status::invalid_arg, "ask: the session was made for another model");
    }
    ask_result out;

    // Retrieve; chunks of whitespace cannot be prompt pieces (they have no tokens).
    const auto t_search = clock_type::now();
    search_result found = search(question, p.search);
    out.search_ms = ms_between(t_search, clock_type::now());
    out.searched = found.mode;
    append_notice(&out.notice, found.notice);
    std::vector<search_hit> hits;
    for (search_hit& h : found.hits) {
        if (!is_blank(h.text)) hits.push_back(std::move(h));
    }
    if (hits.empty()) {
        throw error(status::invalid_arg,
                    "ask: no chunk of " + dir_ + " matches the question" +
                        (p.search.filter.empty() ? std::string(" (ingest documents first)")
                                                 : std::string(" within the filter (collection, "
                                                               "uri prefix, metadata)")));
    }
    s.throw_if_cancelled();

    // Assemble within the context, keeping room to answer: drop the lowest-ranked chunks first.
    const int64_t n_ctx = s.n_ctx();
    const int64_t gen_room = std::min<int64_t>(std::max(p.gen.max_tokens, 0), n_ctx / 4);
    std::vector<std::string> passages;
    for (const search_hit& h : hits) passages.push_back(h.text);
    blend_request req = build_blend_request(*llm_, default_rag_prompt(passages, question));
    int64_t n_prompt = request_tokens(req);
    while (n_prompt + gen_room > n_ctx && passages.size() > 1) {
        passages.pop_back();
        hits.pop_back();
        ++out.chunks_dropped;
        req = build_blend_request(*llm_, default_rag_prompt(passages, question));
        n_prompt = request_tokens(req);
    }
    if (n_prompt > n_ctx) {
        throw error(status::range,
                    fmt("ask: the question and the best chunk (%lld tokens) do not fit the "
                        "context of %lld tokens: ask a shorter question, make the session's "
                        "context larger or ingest with smaller chunks",
                        static_cast<long long>(n_prompt), static_cast<long long>(n_ctx)));
    }
    out.prompt_tokens = n_prompt;
    out.citations = std::move(hits);

    const blended_answer a = s.answer(req, p.gen, on_token, p.compare_full);
    out.gen = a.gen;
    out.blend = a.blend;
    out.store_ms = a.store_ms;
    out.full_ttft_ms = a.full_ttft_ms;
    append_notice(&out.notice, out.blend.fallback_reason);
    // Removing a document deletes its chunks' KV by these keys.
    for (size_t i = 0; i < a.chunk_keys.size(); ++i) {
        docs().cat().set_kv_key(out.citations[i].chunk_id, a.chunk_keys[i]);
    }
    return out;
}

}  // namespace cacheblend
