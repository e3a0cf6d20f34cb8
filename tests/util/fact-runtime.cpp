#include "util/fact-runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "util/test-util.h"

namespace cbltest {

const char* const k_facts[4] = {
    "The Amazon river flows through Brazil, Peru and Colombia.",
    "Mount Kilimanjaro is a dormant volcano in Tanzania.",
    "Sourdough bread is leavened by wild yeast and lactic acid bacteria.",
    "The lighthouse of Alexandria was one of the seven wonders of the ancient world.",
};

fact_runtime::~fact_runtime() {
    cbl_runtime_free(rt);
    if (!dir.empty()) std::system(("rm -rf '" + dir + "'").c_str());
}

void open_fact_runtime(const std::string& model, cbl_runtime_params rp, fact_runtime* out) {
    const std::string dir = make_temp_dir("cbl-facts");
    if (dir == "/tmp") return;  // mkdtemp failed (already a test failure); never remove /tmp
    out->dir = dir;
    const std::string data = out->dir + "/data";
    rp.model_path = model.c_str();
    rp.data_dir = data.c_str();
    if (cbl_runtime_open(&rp, &out->rt) != CBL_OK) {
        ADD_FAILURE() << "cbl_runtime_open: " << cbl_last_error();
        return;
    }
    for (size_t i = 0; i < 4; ++i) {
        const std::string uri = "mem://fact" + std::to_string(i);
        if (cbl_runtime_ingest_text(out->rt, uri.c_str(), k_facts[i], std::strlen(k_facts[i]),
                                    nullptr, nullptr) != CBL_OK) {
            ADD_FAILURE() << "ingest " << uri << ": " << cbl_last_error();
            cbl_runtime_free(out->rt);
            out->rt = nullptr;
            return;
        }
    }
}

}  // namespace cbltest
