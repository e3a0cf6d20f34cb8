// QA datasets for `cacheblend eval`: the musique_s.json schema of CacheBlend's inputs/
// (docs/ARCHITECTURE.md, 'Evaluation'), a JSON list of {ctxs, question, answers}. ctxs and answers
// may be JSON values or strings that hold Python literals ("[{'title': '', 'text': '...'}]"), so
// the reader parses both syntaxes.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>


namespace cacheblend::cli {

// A parsed JSON value or Python literal (lists and tuples are both lists; dict keys are strings).
struct literal {
    enum kind_t { none, boolean, number, string, list, dict } kind = none;
    bool b = false;
    double num = 0;
    std::string str;
    std::vector<literal> items;
    std::vector<std::pair<std::string, literal>> fields;  // in source order

    const literal* get(std::string_view key) const;  // nullptr when absent or not a dict
};

enum class literal_syntax {
    json,    // RFC 8259
    python,  // ast.literal_eval subset: '...' / "..." (u, r, b prefixes, triple quotes, Python
             // escapes), True/False/None, lists, tuples, dicts, numbers, trailing commas
};

// Parses one value followed only by white space. Throws capi_error(CBL_FORMAT) with
// "line L, column C: what" on malformed input.
literal parse_literal(std::string_view text, literal_syntax syntax);

struct qa_passage {
    std::string title;
    std::string text;
};

struct qa_record {
    std::vector<qa_passage> ctxs;
    std::string question;
    std::vector<std::string> answers;  // may be empty: fidelity needs no gold answers
};

// Reads the whole dataset. Throws capi_error (CBL_IO when unreadable, CBL_FORMAT
// naming the record and field when malformed).
std::vector<qa_record> load_qa_dataset(const std::string& path);

}  // namespace cacheblend::cli
