#pragma once
// The built-in demo image: a procedurally drawn indoor room in one-point perspective (floor
// boards, walls, ceiling, a window, a door, a bookcase, boxes, a rug), with light texture
// noise and a slight blur. The app opens it on first launch; tests use it as an input for
// line detection, with its exact ground-truth line segments.
#include <array>
#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

namespace glimpse {

struct DemoScene {
    cv::Mat image;   // CV_8UC3, RGB
    // Visible straight edges [x1, y1, x2, y2] in pixels ((0, 0) is the centre of the top-left
    // pixel), clipped to the image and to the objects drawn in front of them.
    std::vector<std::array<float, 4>> lines;
};

// Deterministic: the same size and seed give the same pixels (the seed varies the room's
// proportions, the camera and the furniture). Sizes from 16 to kMaxImageSide (image.h); throws
// glimpse::Error otherwise.
DemoScene makeDemoScene(int width = 1024, int height = 768, uint64_t seed = 1);
cv::Mat makeDemoImage(int width = 1024, int height = 768, uint64_t seed = 1);

} // namespace glimpse
