// Fuzz target: any HDF5 file given to `glimpse info` or File > Open (identifyGlimpseFile,
// describeH5).
#include "core/file_kind.h"
#include "core/info.h"
#include "fuzz/fuzz_util.h"

using namespace glimpse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::tempPath("info.h5");
    fuzz::writeFile(path, data, size);
    fuzz::expectClearError([&] { (void)identifyGlimpseFile(path); });
    fuzz::expectClearError([&] { (void)describeH5(path); });
    return 0;
}
