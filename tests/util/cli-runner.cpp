#include "util/cli-runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

namespace cbltest {

std::string cli_path() {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return "";
    std::string dir(buf, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));  // <build>/tests
    return dir.substr(0, dir.rfind('/')) + "/bin/cacheblend";
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream o(path, std::ios::binary | std::ios::trunc);
    o << text;
}

std::vector<std::string> cli_result::err_lines() const {
    std::vector<std::string> lines;
    size_t p = 0;
    while (p < err.size()) {
        const size_t nl = err.find('\n', p);
        lines.push_back(err.substr(p, nl == std::string::npos ? nl : nl - p));
        if (nl == std::string::npos) break;
        p = nl + 1;
    }
    return lines;
}

cli_result run_cli(const std::vector<std::string>& args, const std::string& err_file) {
    std::vector<std::string> argv{cli_path()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_program(argv, err_file);
}

cli_result run_program(const std::vector<std::string>& argv, const std::string& err_file) {
    std::string cmd;
    for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + shell_quote(a);
    cmd += " 2>" + shell_quote(err_file);
    cli_result r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
    const int st = ::pclose(p);
    if (WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) r.signal = WTERMSIG(st);
    r.err = read_all(err_file);
    std::remove(err_file.c_str());
    return r;
}

}  // namespace cbltest
