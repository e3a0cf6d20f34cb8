#include "args.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace cacheblend::cli {
namespace {

const flag_spec* find_flag(const command_spec& spec, const std::string& name) {
    for (const flag_spec& f : spec.flags) {
        if (f.name == name) return &f;
    }
    return nullptr;
}

std::string quoted(const std::string& s) {
    // Keep error messages on one line whatever the user typed.
    std::string out = "'";
    for (char c : s) out += (c == '\n' || c == '\r') ? ' ' : c;
    return out + "'";
}

}  // namespace

std::optional<std::string> parsed_args::get(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end() || it->second.empty()) return std::nullopt;
    return it->second.back();
}

std::string parsed_args::get_or(const std::string& name, const std::string& def) const {
    return get(name).value_or(def);
}

std::vector<std::string> parsed_args::get_all(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
}

int64_t parsed_args::get_int(const std::string& name, int64_t def, int64_t min, int64_t max) const {
    const auto s = get(name);
    if (!s) return def;
    int64_t v = 0;
    const char* end = s->data() + s->size();
    const auto r = std::from_chars(s->data(), end, v);
    if (s->empty() || r.ec == std::errc::invalid_argument || r.ptr != end) {
        throw usage_error("--" + name + ": expected an integer, got " + quoted(*s));
    }
    if (r.ec == std::errc::result_out_of_range || v < min || v > max) {
        throw usage_error("--" + name + ": " + *s + " is out of range [" + std::to_string(min) +
                          ", " + std::to_string(max) + "]");
    }
    return v;
}

uint64_t parsed_args::get_u64(const std::string& name, uint64_t def) const {
    const auto s = get(name);
    if (!s) return def;
    uint64_t v = 0;
    const char* end = s->data() + s->size();
    const auto r = std::from_chars(s->data(), end, v);
    if (s->empty() || r.ec != std::errc() || r.ptr != end) {
        throw usage_error("--" + name + ": expected a non-negative 64-bit integer, got " +
                          quoted(*s));
    }
    return v;
}

double parsed_args::get_double(const std::string& name, double def, double min, double max) const {
    const auto s = get(name);
    if (!s) return def;
    double v = 0;
    const char* end = s->data() + s->size();
    const auto r = std::from_chars(s->data(), end, v);
    if (s->empty() || r.ec != std::errc() || r.ptr != end || !std::isfinite(v)) {
        throw usage_error("--" + name + ": expected a number, got " + quoted(*s));
    }
    if (v < min || v > max) {
        std::ostringstream os;
        os << "--" << name << ": " << *s << " is out of range [" << min << ", " << max << "]";
        throw usage_error(os.str());
    }
    return v;
}

std::vector<int64_t> parsed_args::get_int_list(const std::string& name, const std::string& def,
                                               int64_t min, int64_t max) const {
    const std::string s = get_or(name, def);
    std::vector<int64_t> out;
    size_t pos = 0;
    while (true) {
        const size_t comma = s.find(',', pos);
        const std::string item = s.substr(pos, comma == std::string::npos ? comma : comma - pos);
        int64_t v = 0;
        const char* end = item.data() + item.size();
        const auto r = std::from_chars(item.data(), end, v);
        if (item.empty() || r.ec == std::errc::invalid_argument || r.ptr != end) {
            throw usage_error("--" + name + ": expected comma-separated integers, got " +
                              quoted(s));
        }
        if (r.ec == std::errc::result_out_of_range || v < min || v > max) {
            throw usage_error("--" + name + ": " + item + " is out of range [" +
                              std::to_string(min) + ", " + std::to_string(max) + "]");
        }
        out.push_back(v);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

parsed_args parse_args(const command_spec& spec, const std::vector<std::string>& args) {
    parsed_args out;
    std::optional<usage_error> first_error;
    const auto fail = [&](const std::string& msg) {
        if (!first_error) first_error = usage_error(msg);
    };
    bool flags_done = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (flags_done || a.size() < 2 || a[0] != '-') {
            if (static_cast<int>(out.positional_.size()) >= spec.max_positional) {
                fail("unexpected argument " + quoted(a));
            } else {
                out.positional_.push_back(a);
            }
            continue;
        }
        if (a == "--") {
            flags_done = true;
            continue;
        }
        if (a == "-h" || a == "--help") {
            out.help = true;
            continue;
        }
        if (a.compare(0, 2, "--") != 0) {
            fail("unknown flag " + quoted(a) + " (flags are spelled --name)");
            continue;
        }
        const size_t eq = a.find('=');
        const std::string name = a.substr(2, eq == std::string::npos ? eq : eq - 2);
        const flag_spec* f = find_flag(spec, name);
        if (!f) {
            fail("unknown flag " + quoted("--" + name) + " for '" + spec.name +
                 "' (see cacheblend " + spec.name + " --help)");
            continue;
        }
        std::string value;
        if (f->value_name.empty()) {
            if (eq != std::string::npos) {
                fail("--" + name + " does not take a value");
                continue;
            }
        } else if (eq != std::string::npos) {
            value = a.substr(eq + 1);
        } else if (i + 1 < args.size()) {
            // The next word is the value even when it starts with '-' (negative numbers, text).
            value = args[++i];
        } else {
            fail("--" + name + " needs a value (" + f->value_name + ")");
            continue;
        }
        auto& slot = out.values_[name];
        if (!slot.empty() && !f->repeatable) {
            fail("--" + name + " given more than once");
            continue;
        }
        slot.push_back(std::move(value));
    }
    if (!out.help && first_error) throw *first_error;
    return out;
}

std::string format_help(const command_spec& spec) {
    std::ostringstream os;
    os << "usage: cacheblend " << spec.usage << "\n\n" << spec.summary << "\n";
    if (!spec.flags.empty()) {
        os << "\noptions:\n";
        std::vector<std::string> left;
        size_t width = 0;
        for (const flag_spec& f : spec.flags) {
            std::string l = "--" + f.name;
            if (!f.value_name.empty()) l += " " + f.value_name;
            width = std::max(width, l.size());
            left.push_back(std::move(l));
        }
        left.emplace_back("-h, --help");
        width = std::max(width, left.back().size());
        for (size_t i = 0; i < left.size(); ++i) {
            const std::string& help = i < spec.flags.size() ? spec.flags[i].help : "show this help";
            os << "  " << left[i] << std::string(width - left[i].size() + 2, ' ') << help << "\n";
        }
    }
    if (!spec.details.empty()) os << "\n" << spec.details << "\n";
    return os.str();
}

}  // namespace cacheblend::cli
