// Fuzz target: XTRA's offline datasets (xtra::readDataset, describeDataset, the dataset summary
// of glimpse info) and the replay buffer of an EfficientZero run's state.h5 (readRunReplay, what
// `glimpse data offline --from-run` reads).
#include <filesystem>

#include "core/info.h"
#include "core/models/efficientzero/train.h"
#include "core/models/xtra/dataset.h"
#include "fuzz/fuzz_util.h"

using namespace glimpse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::tempPath("dataset.h5");
    fuzz::writeFile(path, data, size);
    fuzz::expectClearError([&] { (void)xtra::describeDataset(xtra::readDataset(path)); });
    fuzz::expectClearError([&] { (void)describeH5(path); });
    const std::string run = fuzz::tempPath("run");
    std::filesystem::create_directories(run);
    fuzz::writeFile(run + "/state.h5", data, size);
    fuzz::expectClearError([&] { (void)efficientzero::readRunReplay(run); });
    return 0;
}
