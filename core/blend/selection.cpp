#include "core/blend/selection.h"

#include "core/blend/select-policies.h"
#include "core/util/error.h"

namespace cacheblend {
namespace {

struct policy_entry {
    select_policy policy;
    const char* name;
    std::unique_ptr<token_selector> (*make)();
};

// The one table of policies: names, order and constructors.
const policy_entry k_policies[] = {
    {select_policy::hkvd, "hkvd", make_hkvd_selector},
    {select_policy::sink, "sink", make_sink_selector},
    {select_policy::sink_hkvd, "sink+hkvd", make_sink_hkvd_selector},
    {select_policy::query, "query", make_query_selector},
    {select_policy::query_hkvd, "query+hkvd", make_query_hkvd_selector},
};

}  // namespace

const std::vector<select_policy>& select_policies() {
    static const std::vector<select_policy> all = [] {
        std::vector<select_policy> v;
        for (const policy_entry& e : k_policies) v.push_back(e.policy);
        return v;
    }();
    return all;
}

const char* select_policy_name(select_policy p) {
    for (const policy_entry& e : k_policies) {
        if (e.policy == p) return e.name;
    }
    return "?";
}

bool parse_select_policy(const std::string& s, select_policy* out) {
    for (const policy_entry& e : k_policies) {
        if (s == e.name) {
            *out = e.policy;
            return true;
        }
    }
    return false;
}

std::string select_policy_names() {
    std::string out;
    for (const policy_entry& e : k_policies) {
        if (!out.empty()) out += ", ";
        out += e.name;
    }
    return out;
}

std::unique_ptr<token_selector> make_token_selector(select_policy p) {
    for (const policy_entry& e : k_policies) {
        if (e.policy == p) return e.make();
    }
    throw error(status::invalid_arg,
                fmt("blend: unknown selection policy %d", static_cast<int>(p)));
}

}  // namespace cacheblend
