// Running the built `cacheblend` CLI from the model tests: <build>/tests/<test> finds
// <build>/bin/cacheblend, runs it with arguments and captures stdout, stderr and the exit code.
#pragma once

#include <string>
#include <vector>

namespace cbltest {

std::string cli_path();  // "" when /proc/self/exe cannot be read
std::string shell_quote(const std::string& s);
std::string read_all(const std::string& path);
void write_file(const std::string& path, const std::string& text);

struct cli_result {
    int exit_code = -1;  // -1 when killed by a signal
    int signal = 0;
    std::string out, err;
    std::vector<std::string> err_lines() const;
};

// Runs the CLI with args; stderr goes through err_file (removed afterwards).
cli_result run_cli(const std::vector<std::string>& args, const std::string& err_file);
// The same for any program: argv[0] is looked up on PATH.
cli_result run_program(const std::vector<std::string>& argv, const std::string& err_file);

}  // namespace cbltest
