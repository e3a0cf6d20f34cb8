// Flag parsing for the CLI: `--flag value`, `--flag=value`, boolean switches, `-h`/`--help` and
// `--` to end the flags. Anything malformed throws usage_error (exit code 2); typed getters
// validate numbers strictly ("12x" and out-of-range values are errors, not silently clamped).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cacheblend::cli {

// Bad command line: main prints it and exits with status 2.
class usage_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct flag_spec {
    std::string name;        // without the leading dashes: "max-tokens"
    std::string value_name;  // empty: a switch that takes no value
    std::string help;
    bool repeatable = false;
};

struct command_spec {
    std::string name;     // "generate"
    std::string usage;    // text after "cacheblend ": "generate --prompt P [options]"
    std::string summary;  // one line for the top-level help
    std::vector<flag_spec> flags;
    int max_positional = 0;
    std::string details;  // optional paragraph after the flag list
};

class parsed_args {
public:
    bool help = false;

    bool has(const std::string& name) const { return values_.count(name) != 0; }
    std::optional<std::string> get(const std::string& name) const;
    std::string get_or(const std::string& name, const std::string& def) const;
    std::vector<std::string> get_all(const std::string& name) const;
    const std::vector<std::string>& positional() const { return positional_; }
    // Every flag given, by name (a switch holds one empty value).
    const std::map<std::string, std::vector<std::string>>& all() const { return values_; }

    int64_t get_int(const std::string& name, int64_t def, int64_t min, int64_t max) const;
    uint64_t get_u64(const std::string& name, uint64_t def) const;
    double get_double(const std::string& name, double def, double min, double max) const;
    // Comma-separated integers, e.g. "128,512,2048"; each within [min, max].
    std::vector<int64_t> get_int_list(const std::string& name, const std::string& def, int64_t min,
                                      int64_t max) const;

private:
    friend parsed_args parse_args(const command_spec& spec, const std::vector<std::string>& args);
    std::map<std::string, std::vector<std::string>> values_;  // switches hold one empty value
    std::vector<std::string> positional_;
};

// Parses `args` (the words after the subcommand). When -h/--help appears, returns with help set
// and does not report other problems.
parsed_args parse_args(const command_spec& spec, const std::vector<std::string>& args);

// "usage: cacheblend <usage>\n\n<summary>\n\noptions:\n  --flag VALUE  help\n..."
std::string format_help(const command_spec& spec);

}  // namespace cacheblend::cli
