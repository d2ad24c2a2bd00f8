// Fuzz target: video files (VideoReader: open, first and last frame).
#include "core/io/video.h"
#include "fuzz/fuzz_util.h"

using namespace glimpse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::tempPath("video.avi");
    fuzz::writeFile(path, data, size);
    fuzz::expectClearError(
        [&] {
            VideoReader v(path);
            (void)v.frame(0);
            if (v.frameCount() > 1) (void)v.frame(v.frameCount() - 1);
        },
        false);
    return 0;
}
