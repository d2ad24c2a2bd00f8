#pragma once
// What the results browser draws for one sample of a results file (core/results/results.h):
// the viewport scene (widgets::ViewportScene, drawn by the Vulkan viewport) and the same lines
// rasterized with OpenCV for thumbnails and contact sheets (no GPU on worker threads).
//   LETR: the chosen row's (layer or baseline) predictions scored >= minScore, true positives
//     at the chosen sAP threshold green, false positives red, ground truth no shown prediction
//     matched dashed yellow;
//   classification: a frame green (correct) or red (wrong) and overlay rows with the label and
//     the top 5;
//   few-shot: a mosaic of the episode (a row per way: its supports, then its queries), each
//     query framed green when the predicted way is its own and red otherwise.
// No widgets: the dock, the thumbnail workers, the contact sheet and the tests share it.
#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "core/results/results.h"
#include "renderer/scene.h"

namespace glimpse::app::results_view {

// Colours (checked by tests).
constexpr float kTpRgb[3] = {0.15f, 0.9f, 0.25f};
constexpr float kFpRgb[3] = {1.0f, 0.15f, 0.15f};
constexpr float kMissedRgb[3] = {1.0f, 0.85f, 0.1f};
constexpr float kSupportRgb[3] = {0.35f, 0.55f, 1.0f};
constexpr float kLineWidthPx = 2.5f;

// One LETR sample's overlay at (threshold index, minScore).
struct LetrOverlay {
    std::vector<render::LineSegment> lines;   // missed GT dashes first, then FP, then TP (on top)
    std::vector<int> ids;                     // per segment: index into the sample's stored lines, -1 for GT
    std::vector<std::string> labels;          // hover text
    int64_t tp = 0, fp = 0, missed = 0;
    std::vector<int> fpLines;                 // stored-line indices of the shown false positives, best first
};
LetrOverlay letrOverlay(const std::vector<glimpse::results::LineRecord>& lines,
                        const std::vector<eval::GtLine>& gt, size_t threshold, float minScore, int width,
                        int height);

// The viewport scene of a LETR overlay; `rows` describe it (layer, threshold, counts...).
render::ViewportScene letrScene(const LetrOverlay& o, std::vector<std::pair<std::string, std::string>> rows);

// A classification sample: frame and rows.
render::ViewportScene classScene(int width, int height, const std::string& label, const std::string& predicted,
                                 bool correct, const std::vector<std::pair<std::string, float>>& top5);

// A few-shot episode as one image: `tiles` are the images of the episode's supports then
// queries (way-major, as EpisodeIn lists them), any size, gray or RGB.
struct EpisodeMosaic {
    cv::Mat rgb;   // CV_8UC3
    render::ViewportScene scene;
    int tile = 0;
    int64_t wrong = 0;
};
EpisodeMosaic episodeMosaic(const glimpse::results::EpisodeIn& e, const glimpse::results::FewShotSetting& s,
                            const std::vector<cv::Mat>& tiles, const std::vector<std::string>& classNames,
                            int tile = 84);

// RGB CV_8UC3 copy of any 8-bit image (gray or RGB).
cv::Mat toRgb8(const cv::Mat& image);
// Draws the scene's lines into `rgb` (CV_8UC3, RGB) at scale `scale` (image pixels -> rgb
// pixels), widths scaled but at least 1 pixel.
void rasterizeLines(cv::Mat& rgb, const std::vector<render::LineSegment>& lines, double scale);

// A contact sheet: each (image with its overlay drawn, caption) as a tile of at most
// `tileSide` pixels, `columns` per row, captions under the tiles; RGB CV_8UC3.
struct SheetTile {
    cv::Mat rgb;            // the image with its overlay already drawn
    std::string caption;
};
cv::Mat contactSheet(const std::vector<SheetTile>& tiles, int columns, int tileSide = 256);

} // namespace glimpse::app::results_view
