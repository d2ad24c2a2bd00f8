#pragma once
// CoatView: turns a CoatTrace and the CoaT inspector's settings (mode, scale, block, head,
// query pixel, class, key channel, colour map, opacity) into the plain buffers the viewport
// draws (widgets::ViewportScene). No widgets and no model: every map is answered by the trace
// (exact recomputations, see core/models/coat/trace.h), plus Grad-CAMs of extra classes that
// the inspector computed on a worker thread and handed over with addCam().
//
// Geometry: the network sees an S x S centre crop of the image resized so that its shorter
// side is config.resize. The viewport shows either the original image (after a run) or the
// crop itself (a trace opened from a file); the crop's rectangle in the shown image's pixels
// is worked out from the trace's meta, and token (y, x) of scale s covers crop pixels
// [x * 4 * 2^s, (x + 1) * 4 * 2^s) x [same for y]. Heatmaps are drawn over the crop only
// (NaN, i.e. transparent, elsewhere), one flat colour per token.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/models/coat/trace.h"
#include "renderer/renderer.h"
#include "widgets/viewport.h"

namespace glimpse::app {

enum class CoatMode {
    Attention = 0,   // effective attention w_j of the query pixel over the scale's tokens
    Crpe,            // the query's CRPE window term (per neighbour), shown separately
    Cls,             // CLS-token effective attention over the scale's tokens
    Cam,             // Grad-CAM of the chosen class at the chosen scale
    KeyChannel,      // softmax(K)[:, c]: the per-channel key distribution
};
constexpr int kCoatModeCount = 5;
const char* coatModeName(CoatMode m);
// Parses a mode name as coatModeName() writes it, or its first word ("attention", "crpe",
// "cls", "cam", "key"); throws glimpse::Error listing the names otherwise.
CoatMode coatModeFromName(const std::string& name);

struct CoatViewSettings {
    CoatMode mode = CoatMode::Attention;
    int scale = 0;                // 0..3
    int block = -1;               // index into the scale's blocks (execution order); -1 = last
    int head = -1;                // -1 = mean over heads
    double queryX = -1, queryY = -1;   // query point in shown-image pixels; < 0: the crop's centre
    int64_t camClass = -1;        // -1 = the top-1 class
    int channel = 0;              // key channel (clamped to the head dimension)
    render::Colormap colormap = render::Colormap::Viridis;
    float opacity = 0.6f;
    bool showMarker = true;
};

// Marker colours (checked by tests: neither is gray, so a gray colour map's pixels are told apart).
constexpr float kQueryMarkerRgb[3] = {1.0f, 0.15f, 0.85f};
constexpr float kCropOutlineRgb[3] = {1.0f, 0.8f, 0.1f};

class CoatView {
public:
    // `shownW` x `shownH`: the image the viewport shows: the original image (scaled to any
    // size), or with shownIsCrop the network's input crop itself (a trace opened from a file).
    CoatView(std::shared_ptr<const coat::CoatTrace> trace, int shownW, int shownH, bool shownIsCrop = false);
    const coat::CoatTrace& trace() const { return *trace_; }
    std::shared_ptr<const coat::CoatTrace> tracePtr() const { return trace_; }
    int shownWidth() const { return shownW_; }
    int shownHeight() const { return shownH_; }

    // The crop's rectangle in shown-image pixels.
    double cropX() const { return cropX0_; }
    double cropY() const { return cropY0_; }
    double cropW() const { return cropW_; }
    double cropH() const { return cropH_; }
    int64_t inputSize() const { return S_; }
    static int stride(int scale) { return 4 << scale; }

    // Token of `scale` under shown-image point (ix, iy); false outside the tokens' extent.
    bool tokenAt(int scale, double ix, double iy, int64_t& ty, int64_t& tx) const;
    // Shown-image rectangle of token (ty, tx) of `scale`.
    void tokenRect(int scale, int64_t ty, int64_t tx, double& x0, double& y0, double& x1, double& y1) const;
    // The query point of the settings (the crop's centre when unset).
    std::pair<double, double> queryPoint(const CoatViewSettings& s) const;
    // The query token of the settings at `scale` (clamped into the grid).
    std::pair<int64_t, int64_t> queryToken(const CoatViewSettings& s, int scale) const;

    // Global block index (into trace().block()) of the settings' scale and block.
    int blockIndex(const CoatViewSettings& s) const;
    int blocksInScale(int scale) const;
    // The class the CAM shows (camClass, or the top-1 class).
    int64_t camClass(const CoatViewSettings& s) const;
    // Grad-CAM of `cls` at `scale` is available (stored in the trace or added).
    bool hasCam(int64_t cls, int scale = 3) const;
    void addCam(int64_t cls, torch::Tensor map, int scale = 3);   // [h, w] of the scale's grid
    // The scale a Grad-CAM is first shown at: the last (coarsest, most semantic) scale whose
    // grid is at least kCamMinSide on each side (7x7: scale 4 of a 224 px input, the classic
    // Grad-CAM grid), else scale 1, the finest (a 32 px input: 8x8; its scale 4 is 1x1, a
    // constant map by construction).
    static constexpr int64_t kCamMinSide = 7;
    int defaultCamScale() const;

    struct Map {
        torch::Tensor values;   // [h, w] float on the grid of `scale`; NaN = not drawn
        int scale = 0;
        float vmin = 0, vmax = 1;
        std::string label;      // what a value is ("w_j", "CRPE term", ...)
        std::vector<std::pair<std::string, std::string>> rows;   // overlay rows
    };
    // The map the settings ask for. Throws glimpse::Error (e.g. a CAM that is neither stored
    // nor added, CRPE without CRPE in the model).
    Map map(const CoatViewSettings& s) const;

    // The scene: the map over the crop, the query marker (token outline and cross) for the
    // query-based modes, the crop outline, and the overlay rows (mode, scale, block, head,
    // query, ...). A map that cannot be answered gives a scene without heatmap and a row
    // saying why.
    widgets::ViewportScene scene(const CoatViewSettings& s) const;

    // Key channel thumbnails for the gallery: softmax(K)[:, c] of the settings' block and head,
    // [C, h, w].
    torch::Tensor keyGallery(const CoatViewSettings& s) const;

private:
    std::shared_ptr<const coat::CoatTrace> trace_;
    int shownW_, shownH_;
    int64_t S_ = 0;
    double cropX0_ = 0, cropY0_ = 0, cropW_ = 0, cropH_ = 0;
    std::map<std::pair<int64_t, int>, torch::Tensor> extraCams_;   // (class, scale)
};

// RGB8 thumbnail (rows tightly packed, width w * zoom) of a [h, w] map normalized to its own
// min..max through `colormap`; each map cell becomes zoom x zoom pixels.
std::vector<uint8_t> colorizeMap(const torch::Tensor& map, render::Colormap colormap, int zoom);

// The network's input tensor [3, S, S] from the trace's crop and the model's normalization.
torch::Tensor coatInputFromTrace(const coat::CoatTrace& trace, const coat::CoatConfig& config);

} // namespace glimpse::app
