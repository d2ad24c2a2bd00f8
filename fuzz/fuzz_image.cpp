// Fuzz target: image files (peekImageSize, loadImageRGB), any format OpenCV decodes.
#include "core/io/image.h"
#include "fuzz/fuzz_util.h"

using namespace glimpse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::tempPath("image");
    fuzz::writeFile(path, data, size);
    fuzz::expectClearError([&] { (void)peekImageSize(path); }, false);
    fuzz::expectClearError([&] { (void)loadImageRGB(path); }, false);
    return 0;
}
