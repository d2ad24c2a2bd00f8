#pragma once
// A small dataset folder in /dev/shm (per process) for the dataset targets: the process changes
// into it, so relative --data specs resolve inside it. Built with Glimpse's own writers.
//   img.png                       16x16 RGB
//   ds.json, lines/train.json     a Wireframe JSON of one record (img.png, two segments)
//   cls/{a,b}/N.png               a class-folder dataset (12 images)
//   mini/{train/a,train/b,test/c,test/d}/N.png   the few-shot folder layout
//   fm/{train,t10k}-{images-idx3,labels-idx1}-ubyte   Fashion-MNIST idx files (4 images 4x4)
#include <filesystem>
#include <fstream>
#include <string>

#include <opencv2/core.hpp>
#include <unistd.h>

#include "core/data/classification.h"
#include "core/io/image.h"
#include "fuzz/fuzz_util.h"

namespace glimpse::fuzz {

inline void makeSandbox() {
    namespace fs = std::filesystem;
    const fs::path root = tempPath("sandbox");
    fs::create_directories(root);
    const cv::Mat img(16, 16, CV_8UC3, cv::Scalar(10, 200, 30));
    saveImagePNG((root / "img.png").string(), img);
    const std::string json =
        R"([{"filename": "img.png", "lines": [[1, 1, 10, 12], [0, 15, 15, 0]], "width": 16, "height": 16}])";
    fs::create_directories(root / "lines");
    std::ofstream(root / "ds.json") << json;
    std::ofstream(root / "lines" / "train.json") << R"([{"filename": "../img.png", "lines": [[1, 2, 3, 4]]}])";
    int n = 0;
    for (const char* c : {"a", "b"}) {
        fs::create_directories(root / "cls" / c);
        for (int i = 0; i < 6; ++i) saveImagePNG((root / "cls" / c / (std::to_string(n++) + ".png")).string(), img);
    }
    for (const char* c : {"train/a", "train/b", "test/c", "test/d"}) {
        fs::create_directories(root / "mini" / c);
        for (int i = 0; i < 3; ++i) saveImagePNG((root / "mini" / c / (std::to_string(n++) + ".png")).string(), img);
    }
    fs::create_directories(root / "fm");
    for (const char* split : {"train", "t10k"}) {
        data::IdxArray images{{4, 4, 4}, std::vector<uint8_t>(64, 7)};
        data::IdxArray labels{{4}, {0, 5, 6, 9}};
        data::writeIdx((root / "fm" / (std::string(split) + "-images-idx3-ubyte")).string(), images);
        data::writeIdx((root / "fm" / (std::string(split) + "-labels-idx1-ubyte")).string(), labels);
    }
    if (chdir(root.c_str()) != 0) finding("cannot enter the sandbox", root.string());
}

} // namespace glimpse::fuzz
