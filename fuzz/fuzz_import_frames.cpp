// Fuzz target: PNG+CSV episode import (importFrames). The input is the CSV of actions and
// rewards; the folder holds ten fixed 8x8 frames RZ_1_1.png .. RZ_1_10.png (the names of
// tests/fixtures/make_replay_fixtures.py's frames/ folder, whose labels.txt files are the seeds).
#include <cstdio>
#include <filesystem>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/io/image.h"
#include "core/replay/episode_reader.h"
#include "core/replay/import.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/import_target.h"

using namespace glimpse;

namespace {
std::string makeFolder() {
    const std::string dir = fuzz::tempPath("frames");
    std::filesystem::create_directories(dir);
    for (int i = 1; i <= 10; ++i)
        saveImagePNG(dir + "/RZ_1_" + std::to_string(i) + ".png", cv::Mat(8, 8, CV_8UC3, cv::Scalar(i, 2 * i, 3 * i)));
    return dir;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string dir = makeFolder();
    const std::string out = fuzz::tempPath("frames-out.h5");
    fuzz::writeFile(dir + "/labels.txt", data, size);
    fuzz::importAndReadBack(out, [&] { (void)replay::importFrames(dir, out); });
    return 0;
}
