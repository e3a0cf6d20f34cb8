// The test suite runs on SmolLM2-135M (fast; its expectations are written for it), while the
// library's default model is qwen2.5-coder-1.5b. So unless CBL_MODEL is set (scripts/test.sh sets
// it to the fetched file), every test process sets CBL_MODEL=smollm2-135m before main(): tests
// that load the default model (a NULL path), and the CLI they start, get the suite's model by name.
// Linked into every test as an object library, so this runs whether or not a test refers to it.
#include <cstdlib>

namespace {

const bool k_suite_model_set = [] {
    ::setenv("CBL_MODEL", "smollm2-135m", /*overwrite=*/0);
    return true;
}();

}  // namespace
