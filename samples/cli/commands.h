// Subcommands of the `cacheblend` tool and the helpers they share. Each run_* takes the words after
// the subcommand name and returns the exit code; bad usage throws usage_error (exit 2) and runtime
// failures throw cacheblend::error or std::exception (exit 1), both reported by main.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "args.h"

namespace cacheblend::cli {

extern const char* const k_version;

int run_generate(const std::vector<std::string>& args);
int run_tokenize(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args);
int run_bench_serve(const std::vector<std::string>& args);  // `bench serve ...`
int run_blend(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_calibrate(const std::vector<std::string>& args);
int run_ingest(const std::vector<std::string>& args);
int run_search(const std::vector<std::string>& args);
int run_ask(const std::vector<std::string>& args);
int run_docs(const std::vector<std::string>& args);
int run_stats(const std::vector<std::string>& args);
int run_models(const std::vector<std::string>& args);

// --model M (a GGUF path or a model name), defaulting to the library's default model.
flag_spec model_flag();
// --data DIR: a data directory (catalog, index, KV store).
flag_spec data_flag();
// --device D: the compute device ("cpu", "cuda:N"), and its value: "" for the default, a usage
// error for an empty one. The library checks the name (a device the build or machine lacks).
flag_spec device_flag();
std::string device_arg(const parsed_args& a);

// Prints the subcommand's help on stdout when -h/--help was given; returns true if it did.
bool print_help_if_asked(const command_spec& spec, const parsed_args& a);

// A token piece for human display: quoted, with control and invalid bytes escaped.
std::string printable(const std::string& bytes);

}  // namespace cacheblend::cli
