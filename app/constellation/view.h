#pragma once
// ConstellationView: turns a ConstellationTrace and the ConstellationNet panel's settings
// (view mode, module, head, clicked cell, colour map, opacity) into the plain buffers the
// viewport draws (widgets::ViewportScene). No widgets and no model: every map comes from the
// trace (core/models/constellation/trace.h).
//
// Geometry: the network sees the whole image resized to S x S (aspect not kept), so cell (y, x)
// of a module with an h x w grid covers the shown image's rows [y H / h, (y + 1) H / h) and
// columns [x W / w, (x + 1) W / w), whether the viewport shows the original image (after a run)
// or the S x S input (a trace opened from a file).
//
// The cluster map is a categorical heatmap (ViewportScene::heatPalette): the h x w grid of each
// cell's best cluster, every cell one flat colour, clusterColour(k) for cluster k. The relation
// view is the clicked cell's attention over the module's cells (mean or one head) through the
// colour map, one flat colour per cell.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/models/constellation/trace.h"
#include "renderer/renderer.h"
#include "widgets/viewport.h"

namespace glimpse::app {

enum class ConstellationMode {
    Clusters = 0,   // each cell coloured by its best cluster
    Relation,       // cell relation attention of the clicked cell
};
constexpr int kConstellationModeCount = 2;
const char* constellationModeName(ConstellationMode m);
// "clusters" (or "map", "cluster map") / "relation"; glimpse::Error listing them otherwise.
ConstellationMode constellationModeFromName(const std::string& name);

struct ConstellationViewSettings {
    ConstellationMode mode = ConstellationMode::Clusters;
    int module = -1;                  // index into the trace's modules; -1 = the last
    int head = -1;                    // relation head, -1 = mean over heads
    double pointX = -1, pointY = -1;  // the clicked point in shown-image pixels (< 0: none)
    render::Colormap colormap = render::Colormap::Viridis;
    float opacity = 0.6f;
};

// Outline colour of the clicked cell (magenta: neither a colour-map colour nor gray).
constexpr float kCellMarkerRgb[3] = {1.0f, 0.15f, 0.85f};

struct LegendEntry {
    int64_t cluster = 0;
    int64_t cells = 0;
};

class ConstellationView {
public:
    ConstellationView(std::shared_ptr<const glimpse::constellation::ConstellationTrace> trace, int shownW, int shownH);
    const glimpse::constellation::ConstellationTrace& trace() const { return *trace_; }
    std::shared_ptr<const glimpse::constellation::ConstellationTrace> tracePtr() const { return trace_; }
    int shownWidth() const { return shownW_; }
    int shownHeight() const { return shownH_; }

    // The settings' module (the last one for -1), clamped into the trace's modules.
    int moduleIndex(const ConstellationViewSettings& s) const;
    // The cell of module m under shown-image point (ix, iy); false outside the image.
    bool cellAt(int m, double ix, double iy, int64_t& y, int64_t& x) const;
    // Shown-image rectangle and centre of cell (y, x) of module m.
    void cellRect(int m, int64_t y, int64_t x, double& x0, double& y0, double& x1, double& y1) const;
    std::pair<double, double> cellCentre(int m, int64_t y, int64_t x) const;
    // The settings' clicked cell of the settings' module; false when none is set.
    bool clickedCell(const ConstellationViewSettings& s, int64_t& y, int64_t& x) const;

    // The clusters present in module m's map, most cells first (ties: lower id first).
    std::vector<LegendEntry> legend(int m) const;
    // "cell (y, x): #12 0.831, #4 0.612, #7 0.550" (the top 3 clusters and similarities).
    std::string hoverText(int m, int64_t y, int64_t x) const;
    // Why the relation view of the settings cannot be shown ("" when it can).
    std::string relationProblem(const ConstellationViewSettings& s) const;
    // The clicked cell's relation attention over the module's cells [h, w] (throws when
    // relationProblem() is not empty).
    torch::Tensor relationMap(const ConstellationViewSettings& s) const;

    // The scene of the settings: the cluster map or the relation map, the clicked cell's
    // outline, and overlay rows (view, module, grid, head, cell, ...). A relation view that
    // cannot be shown gives no heatmap and a row saying why.
    widgets::ViewportScene scene(const ConstellationViewSettings& s) const;

private:
    void addRelation(widgets::ViewportScene& sc, const ConstellationViewSettings& s, int m) const;

    std::shared_ptr<const glimpse::constellation::ConstellationTrace> trace_;
    int shownW_, shownH_;
};

// RGB8 colours of clusters 0..K-1 (clusterColour), as ViewportScene::heatPalette takes them.
std::vector<uint8_t> clusterPalette(int64_t clusters);
// The cluster map of an [h, w] assignment as an RGB image of h * zoom x w * zoom (CV_8UC3).
cv::Mat clusterMapImage(const torch::Tensor& assignment, int zoom);

} // namespace glimpse::app
