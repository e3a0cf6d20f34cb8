// `cacheblend`: the command-line front end to libcacheblend (docs/ARCHITECTURE.md, 'Command-line
// tool'). main() dispatches to a subcommand and turns every failure into one `cacheblend: error:
// ...` line on stderr and an exit code: 2 for usage errors, 1 for runtime errors. With --json a
// failure also prints {"error": {"status": "...", "message": "..."}} on stdout, where a script
// already reads the command's JSON; stderr keeps the line people and logs read (README, 'Errors
// and exit codes').
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "capi-util.h"
#include "commands.h"
#include "json-writer.h"

namespace {

using cacheblend::cli::usage_error;

struct command_entry {
    const char* name;
    const char* summary;
    int (*run)(const std::vector<std::string>& args);  // nullptr: reserved, not available yet
};

// To add a subcommand: write cmd-<name>.cpp with run_<name>() and list it here.
const command_entry k_commands[] = {
    {"generate", "generate text from a prompt (plain or chat)", cacheblend::cli::run_generate},
    {"tokenize", "print the token ids of a text", cacheblend::cli::run_tokenize},
    {"bench", "measure prefill or decode throughput", cacheblend::cli::run_bench},
    {"blend", "answer from document chunks with blended KV caches", cacheblend::cli::run_blend},
    {"ingest", "chunk, embed and precompute KV for documents", cacheblend::cli::run_ingest},
    {"search", "retrieve chunks for a query", cacheblend::cli::run_search},
    {"ask", "retrieve and answer with blended KV caches", cacheblend::cli::run_ask},
    {"docs", "list the documents of a data directory", cacheblend::cli::run_docs},
    {"stats", "show a data directory's sizes and its KV store against the budget",
     cacheblend::cli::run_stats},
    {"eval", "compare modes on a QA dataset", cacheblend::cli::run_eval},
    {"calibrate", "record the smallest ratio that keeps blending faithful to full prefill",
     cacheblend::cli::run_calibrate},
    {"models", "list the named models, where they are cached and which are present",
     cacheblend::cli::run_models},
};

std::string top_help() {
    std::string s =
        "usage: cacheblend <command> [options]\n"
        "       cacheblend <command> --help\n"
        "       cacheblend --version\n\n"
        "commands:\n";
    for (const command_entry& c : k_commands) {
        std::string line = "  " + std::string(c.name);
        line.resize(14, ' ');
        s += line + c.summary + (c.run ? "" : " (planned)") + "\n";
    }
    s += "\nEvery command takes --json for machine-readable output on stdout.\n";
    return s;
}

// Error messages may come from deep inside the library; keep them to one line.
std::string one_line(std::string msg) {
    for (char& c : msg) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    while (!msg.empty() && msg.back() == ' ') msg.pop_back();
    return msg.empty() ? "unknown error" : msg;
}

// Set by main when the command line asks for --json (before a "--"): errors are also JSON.
bool g_json_errors = false;

// The status word of a JSON error: "usage" for bad command lines, else the C ABI's status name.
const char* status_word(cbl_status s) {
    switch (s & 0xff) {
        case CBL_INVALID_ARG: return "invalid_arg";
        case CBL_MISUSE: return "misuse";
        case CBL_NOMEM: return "nomem";
        case CBL_IO: return "io";
        case CBL_CORRUPT: return "corrupt";
        case CBL_FORMAT: return "format";
        case CBL_UNSUPPORTED: return "unsupported";
        case CBL_DEVICE: return "device";
        case CBL_ABORTED: return "aborted";
        case CBL_RANGE: return "range";
        case CBL_CATALOG: return "catalog";
        case CBL_INTERNAL: return "internal";
        case CBL_BUSY: return "busy";
        default: return "error";
    }
}

int report(const std::string& msg, int code, const char* status = nullptr) {
    if (g_json_errors) {
        cacheblend::cli::json_writer w(std::cout);
        w.begin_object().key("error").begin_object();
        w.field("status", status ? status : code == 2 ? "usage" : "error");
        w.field("message", one_line(msg)).end_object().end_object();
        std::cout << "\n";
    }
    std::cout.flush();
    std::fflush(stdout);
    std::fprintf(stderr, "cacheblend: error: %s\n", one_line(msg).c_str());
    return code;
}

bool wants_json(int argc, char** argv) {
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") return false;
        if (a == "--json") return true;
    }
    return false;
}

int dispatch(int argc, char** argv) {
    if (argc < 2) throw usage_error("no command given (see cacheblend --help)");
    const std::string cmd = argv[1];
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
        std::fputs(top_help().c_str(), stdout);
        return 0;
    }
    if (cmd == "--version" || cmd == "-V") {
        std::printf("cacheblend %s\n", cacheblend::cli::k_version);
        return 0;
    }
    for (const command_entry& c : k_commands) {
        if (cmd != c.name) continue;
        if (!c.run) {
            return report("'" + cmd + "' is not available yet (planned: see README)", 2);
        }
        return c.run(std::vector<std::string>(argv + 2, argv + argc));
    }
    if (!cmd.empty() && cmd[0] == '-') {
        throw usage_error("unknown option '" + cmd + "' (see cacheblend --help)");
    }
    throw usage_error("unknown command '" + cmd + "' (see cacheblend --help)");
}

}  // namespace

int main(int argc, char** argv) {
    int rc = 0;
    g_json_errors = wants_json(argc, argv);
    try {
        rc = dispatch(argc, argv);
    } catch (const usage_error& e) {
        return report(e.what(), 2);
    } catch (const cacheblend::cli::capi_error& e) {
        return report(e.what(), 1, status_word(e.status()));
    } catch (const std::bad_alloc&) {
        return report("out of memory", 1, "nomem");
    } catch (const std::exception& e) { return report(e.what(), 1); } catch (...) {
        return report("unexpected failure", 1);
    }
    // A full disk or closed pipe must not look like success to a script.
    std::cout.flush();
    if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
        return report(std::string("writing to stdout failed: ") + std::strerror(errno), 1);
    }
    return rc;
}
