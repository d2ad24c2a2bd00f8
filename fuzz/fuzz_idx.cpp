// Fuzz target: idx files (readIdx, plain or gzipped; the Fashion-MNIST reader's format).
#include "core/data/classification.h"
#include "fuzz/fuzz_util.h"

using namespace glimpse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::tempPath("data.idx");
    fuzz::writeFile(path, data, size);
    fuzz::expectClearError([&] { (void)data::readIdx(path); }, false);
    fuzz::expectClearError([&] { (void)data::readIdx(path, 3); }, false);
    return 0;
}
