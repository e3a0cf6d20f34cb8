#include "eval-journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include "capi-util.h"
#include "json-writer.h"

namespace cacheblend::cli {
namespace {

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
    throw capi_error(CBL_IO, "eval journal: " + what + " " + path + ": " + std::strerror(errno));
}

// One record as one line of JSON: everything summarize() and write_records() read back.
std::string record_line(const record_result& rec, const qa_record& q) {
    std::ostringstream os;
    json_writer w(os);
    w.begin_object();
    w.field("index", static_cast<int64_t>(rec.index));
    w.field("question", q.question);
    w.field("prompt_tokens", rec.prompt_tokens);
    w.field("full_margin", rec.full_margin);
    w.key("runs").begin_array();
    for (const run_result& r : rec.runs) {
        w.begin_object();
        w.field("text", r.text);
        w.field("answer", r.answer);
        w.field("f1", r.f1);
        w.field("f1_token_ids", r.f1_token_ids);
        w.field("fidelity_f1", r.fidelity_f1);
        w.field("first_token_agree", r.first_token_agree);
        w.field("first_token_kl", r.first_token_kl);
        w.field("first_token", r.first_token);
        w.field("ttft_ms", r.ttft_ms);
        w.key("tokens").begin_array();
        for (int32_t t : r.tokens) w.value(t);
        w.end_array();
        const cbl_stats& s = r.stats;
        w.key("stats").begin_object();
        w.field("mode", s.mode);
        w.field("ratio", s.ratio);
        w.field("ttft_ms", s.ttft_ms);
        w.field("prefill_ms", s.prefill_ms);
        w.field("load_ms", s.load_ms);
        w.field("load_wait_ms", s.load_wait_ms);
        w.field("select_ms", s.select_ms);
        w.field("compute_ms", s.compute_ms);
        w.field("dense_ms", s.dense_ms);
        w.field("relocate_ms", s.relocate_ms);
        w.field("decode_tokens_per_s", s.decode_tokens_per_s);
        w.field("prompt_tokens", s.prompt_tokens);
        w.field("tokens_reused", s.tokens_reused);
        w.field("tokens_recomputed", s.tokens_recomputed);
        w.field("tokens_missed", s.tokens_missed);
        w.field("bytes_loaded", s.bytes_loaded);
        w.field("chunks_hit", s.chunks_hit);
        w.field("chunks_missed", s.chunks_missed);
        w.field("generated_tokens", s.generated_tokens);
        w.field("stop_reason", s.stop_reason);
        w.field("n_ctx", s.n_ctx);
        w.end_object();
        w.end_object();
    }
    w.end_array();
    w.end_object();
    return os.str();
}

// Reads fields of one parsed line, naming the line in every error.
struct line_reader {
    const std::string& path;
    size_t line_no;

    [[noreturn]] void fail(const std::string& what) const {
        throw capi_error(CBL_FORMAT, "eval journal " + path + ", line " + std::to_string(line_no) +
                                         ": " + what);
    }
    const literal& get(const literal& o, const char* key, literal::kind_t kind) const {
        const literal* v = o.get(key);
        if (!v || v->kind != kind) fail(std::string("missing or mistyped field '") + key + "'");
        return *v;
    }
    double num(const literal& o, const char* key) const { return get(o, key, literal::number).num; }
    // A NaN is written as null (an F1 with no gold answer).
    double num_or_nan(const literal& o, const char* key) const {
        const literal* v = o.get(key);
        if (v && v->kind == literal::none) return k_nan;
        return num(o, key);
    }
    int64_t integer(const literal& o, const char* key) const {
        const double d = num(o, key);
        if (d != static_cast<double>(static_cast<int64_t>(d))) {
            fail(std::string("field '") + key + "' is not an integer");
        }
        return static_cast<int64_t>(d);
    }
    int32_t int32(const literal& o, const char* key) const {
        return static_cast<int32_t>(integer(o, key));
    }
};

record_result parse_record(const literal& v, const line_reader& in, size_t n_runs,
                           const std::vector<qa_record>& data) {
    if (v.kind != literal::dict) in.fail("not a JSON object");
    record_result rec;
    const int64_t index = in.integer(v, "index");
    if (index < 0 || static_cast<size_t>(index) >= data.size()) {
        in.fail("record index " + std::to_string(index) + " is not in the dataset");
    }
    rec.index = static_cast<size_t>(index);
    if (in.get(v, "question", literal::string).str != data[rec.index].question) {
        in.fail("record " + std::to_string(index) +
                " asks another question than the dataset's: the dataset changed (start a new "
                "journal)");
    }
    rec.prompt_tokens = in.integer(v, "prompt_tokens");
    // Absent in journals written before it was kept.
    if (v.get("full_margin")) rec.full_margin = in.num_or_nan(v, "full_margin");
    const literal& runs = in.get(v, "runs", literal::list);
    if (runs.items.size() != n_runs) {
        in.fail("record " + std::to_string(index) + " has " + std::to_string(runs.items.size()) +
                " runs, the settings name " + std::to_string(n_runs));
    }
    for (const literal& o : runs.items) {
        if (o.kind != literal::dict) in.fail("a run is not a JSON object");
        run_result r;
        r.text = in.get(o, "text", literal::string).str;
        r.answer = in.get(o, "answer", literal::string).str;
        r.f1 = in.num_or_nan(o, "f1");
        r.f1_token_ids = in.num_or_nan(o, "f1_token_ids");
        r.fidelity_f1 = in.num(o, "fidelity_f1");
        r.first_token_agree = in.get(o, "first_token_agree", literal::boolean).b;
        r.first_token_kl = in.num_or_nan(o, "first_token_kl");
        r.first_token = in.int32(o, "first_token");
        r.ttft_ms = in.num(o, "ttft_ms");
        for (const literal& t : in.get(o, "tokens", literal::list).items) {
            if (t.kind != literal::number) in.fail("a token id is not a number");
            r.tokens.push_back(static_cast<int32_t>(t.num));
        }
        const literal& s = in.get(o, "stats", literal::dict);
        cbl_stats_init(&r.stats);
        cbl_stats& st = r.stats;
        st.mode = in.int32(s, "mode");
        st.ratio = static_cast<float>(in.num(s, "ratio"));
        st.ttft_ms = in.num(s, "ttft_ms");
        st.prefill_ms = in.num(s, "prefill_ms");
        st.load_ms = in.num(s, "load_ms");
        st.load_wait_ms = in.num(s, "load_wait_ms");
        st.select_ms = in.num(s, "select_ms");
        st.compute_ms = in.num(s, "compute_ms");
        // Journals written before the time split lack these two.
        if (s.get("dense_ms")) st.dense_ms = in.num(s, "dense_ms");
        if (s.get("relocate_ms")) st.relocate_ms = in.num(s, "relocate_ms");
        st.decode_tokens_per_s = in.num(s, "decode_tokens_per_s");
        st.prompt_tokens = in.integer(s, "prompt_tokens");
        st.tokens_reused = in.integer(s, "tokens_reused");
        st.tokens_recomputed = in.integer(s, "tokens_recomputed");
        st.tokens_missed = in.integer(s, "tokens_missed");
        st.bytes_loaded = static_cast<uint64_t>(in.integer(s, "bytes_loaded"));
        st.chunks_hit = in.int32(s, "chunks_hit");
        st.chunks_missed = in.int32(s, "chunks_missed");
        st.generated_tokens = in.int32(s, "generated_tokens");
        st.stop_reason = in.int32(s, "stop_reason");
        st.n_ctx = in.int32(s, "n_ctx");
        st.notice = "";
        rec.runs.push_back(std::move(r));
    }
    return rec;
}

bool same(const literal& x, const literal& y) {
    if (x.kind != y.kind || x.b != y.b || x.str != y.str) return false;
    if (!(x.num == y.num) && !(std::isnan(x.num) && std::isnan(y.num))) return false;
    if (x.items.size() != y.items.size() || x.fields.size() != y.fields.size()) return false;
    for (size_t i = 0; i < x.items.size(); ++i) {
        if (!same(x.items[i], y.items[i])) return false;
    }
    for (size_t i = 0; i < x.fields.size(); ++i) {
        if (x.fields[i].first != y.fields[i].first ||
            !same(x.fields[i].second, y.fields[i].second)) {
            return false;
        }
    }
    return true;
}

// The model by file name, not path: a journal copied to another machine or cache directory
// resumes there (model_bytes still tells a different file of the same name).
std::string model_file_name(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A settings line as compared: parsed, the model named by its file name. Throws capi_error
// (CBL_FORMAT) when the line is not JSON.
literal comparable_settings(const std::string& line) {
    literal v = parse_literal(line, literal_syntax::json);
    for (auto& [key, value] : v.fields) {
        if (key == "model" && value.kind == literal::string) value.str = model_file_name(value.str);
    }
    return v;
}

bool same_settings(const std::string& journal, const std::string& ours) {
    if (journal == ours) return true;
    try {
        return same(comparable_settings(journal), comparable_settings(ours));
    } catch (const capi_error&) {
        return false;
    }
}

// "max_tokens, flags": the settings whose values differ (or the whole line when it is not ours).
std::string settings_diff(const std::string& journal, const std::string& ours) {
    literal j, o;
    try {
        j = comparable_settings(journal);
        o = comparable_settings(ours);
    } catch (const capi_error&) {
        return "all";
    }
    if (j.kind != literal::dict) return "all";
    std::string out;
    const auto note = [&](const std::string& key) { out += (out.empty() ? "" : ", ") + key; };
    // Top-level keys, and the flags one by one ("--temp").
    const auto compare = [&](const literal& mine, const literal& theirs,
                             const std::string& prefix) {
        for (const auto& [key, value] : mine.fields) {
            const literal* t = theirs.get(key);
            if (key == "flags" && prefix.empty() && t && t->kind == literal::dict) continue;
            if (!t || !same(*t, value)) note(prefix + key);
        }
        for (const auto& [key, value] : theirs.fields) {
            if (!mine.get(key)) note(prefix + key);
        }
    };
    compare(o, j, "");
    const literal* of = o.get("flags");
    const literal* jf = j.get("flags");
    if (of && jf && jf->kind == literal::dict) compare(*of, *jf, "--");
    return out.empty() ? "field order" : out;
}

void write_all(int fd, const std::string& s, const std::string& path) {
    size_t done = 0;
    while (done < s.size()) {
        const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) io_error("cannot write", path);
        done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) io_error("cannot sync", path);
}

struct fd_closer {
    int fd;
    ~fd_closer() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

eval_journal::eval_journal(const std::string& path, const std::string& settings, size_t n_runs,
                           const std::vector<qa_record>& data)
    : path_(path), n_runs_(n_runs) {
    const fd_closer f{::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)};
    if (f.fd < 0) io_error("cannot open", path);
    std::string text;
    char buf[1 << 16];
    for (;;) {
        const ssize_t n = ::read(f.fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) io_error("cannot read", path);
        if (n == 0) break;
        text.append(buf, static_cast<size_t>(n));
    }
    // Only complete lines count: a kill during a write leaves a last line without its newline.
    const size_t complete = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    // Every journal starts with the same bytes: {"journal":"cacheblend eval",...
    const std::string header = settings + "\n";
    const size_t magic = std::min(text.size(), header.find(',') + 1);
    const bool ours = text.compare(0, magic, header, 0, magic) == 0;
    if (!text.empty() && (!ours || (complete == 0 && header.compare(0, text.size(), text) != 0))) {
        // Never overwrite a file that is not a journal (a dataset or --out file given by mistake).
        throw usage_error("--resume: " + path + " exists and is not an eval journal");
    }
    if (complete == 0) {
        // New, or only a torn settings line: the settings line starts it.
        if (::ftruncate(f.fd, 0) != 0) io_error("cannot truncate", path);
        if (::lseek(f.fd, 0, SEEK_SET) < 0) io_error("cannot seek in", path);
        write_all(f.fd, settings + "\n", path);
        return;
    }
    size_t line_no = 1;
    size_t pos = text.find('\n');
    const std::string first = text.substr(0, pos);
    if (!same_settings(first, settings)) {
        throw usage_error("--resume: " + path + " was written by a run with other settings (" +
                          settings_diff(first, settings) +
                          " differ); give these settings another file, or delete it");
    }
    std::vector<bool> seen(data.size(), false);
    for (++pos; pos < complete; ++line_no) {
        const size_t end = text.find('\n', pos);
        const std::string_view line(text.data() + pos, end - pos);
        pos = end + 1;
        const line_reader in{path, line_no + 1};
        literal v;
        try {
            v = parse_literal(line, literal_syntax::json);
        } catch (const capi_error& e) {
            in.fail(e.what());
        }
        record_result rec = parse_record(v, in, n_runs, data);
        if (seen[rec.index]) in.fail("record " + std::to_string(rec.index) + " appears twice");
        seen[rec.index] = true;
        finished_.push_back(std::move(rec));
    }
    if (complete != text.size() && ::ftruncate(f.fd, static_cast<off_t>(complete)) != 0) {
        io_error("cannot drop the torn last line of", path);
    }
}

void eval_journal::append(const record_result& rec, const qa_record& q) {
    if (rec.runs.size() != n_runs_) {
        throw capi_error(CBL_INTERNAL, "eval journal: a record with the wrong number of runs");
    }
    const fd_closer f{::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC)};
    if (f.fd < 0) io_error("cannot open", path_);
    write_all(f.fd, record_line(rec, q) + "\n", path_);
}

}  // namespace cacheblend::cli
