// Fuzz target: Wireframe / YorkUrban line dataset JSON files (WireframeLines and its samples).
// The input is the JSON file; the sandbox (fuzz/sandbox.h) holds img.png beside it.
#include <string>

#include <torch/torch.h>

#include "core/data/wireframe.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/sandbox.h"

using namespace glimpse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const bool ready = (fuzz::makeSandbox(), true);
    (void)ready;
    const std::string path = fuzz::tempPath("sandbox/input.json");
    fuzz::writeFile(path, data, size);
    fuzz::expectClearError(
        [&] {
            data::WireframeLines ds(path);
            (void)ds.describe();
            for (int64_t i = 0; i < ds.size() && i < 3; ++i) (void)ds.get(i);
        },
        false);
    return 0;
}
