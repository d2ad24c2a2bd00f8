#include "app/constellation/view.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"

namespace glimpse::app {

namespace {

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

void addRect(std::vector<render::LineSegment>& out, double x0, double y0, double x1, double y1, const float* rgb,
             float width) {
    const double xs[5] = {x0, x1, x1, x0, x0}, ys[5] = {y0, y0, y1, y1, y0};
    for (int i = 0; i < 4; ++i) {
        render::LineSegment l;
        l.x1 = float(xs[i]);
        l.y1 = float(ys[i]);
        l.x2 = float(xs[i + 1]);
        l.y2 = float(ys[i + 1]);
        l.r = rgb[0];
        l.g = rgb[1];
        l.b = rgb[2];
        l.a = 1.0f;
        l.widthPx = width;
        out.push_back(l);
    }
}

const char* kModeNames[kConstellationModeCount] = {"cluster map", "relation of the clicked cell"};

std::string lower(const std::string& s) {
    std::string out;
    for (char c : s) out += char(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

} // namespace

const char* constellationModeName(ConstellationMode m) {
    const int i = int(m);
    return i >= 0 && i < kConstellationModeCount ? kModeNames[i] : "?";
}

ConstellationMode constellationModeFromName(const std::string& name) {
    const std::string n = lower(name);
    if (n == "clusters" || n == "cluster" || n == "map" || n == "cluster map") return ConstellationMode::Clusters;
    if (n == "relation" || n == lower(kModeNames[1])) return ConstellationMode::Relation;
    throw Error("unknown ConstellationNet view '" + name + "' (clusters or relation)");
}

ConstellationView::ConstellationView(std::shared_ptr<const glimpse::constellation::ConstellationTrace> trace, int shownW,
                                     int shownH)
    : trace_(std::move(trace)), shownW_(shownW), shownH_(shownH) {
    if (!trace_) throw Error("ConstellationView: no trace");
    if (shownW < 1 || shownH < 1) throw Error("ConstellationView: empty shown image");
    if (trace_->numModules() < 1)
        throw Error("ConstellationNet trace: no constellation modules (a ProtoNet baseline has no cluster maps)");
}

int ConstellationView::moduleIndex(const ConstellationViewSettings& s) const {
    const int n = trace_->numModules();
    return s.module < 0 || s.module >= n ? n - 1 : s.module;
}

bool ConstellationView::cellAt(int m, double ix, double iy, int64_t& y, int64_t& x) const {
    const auto& mod = trace_->module(m);
    if (ix < 0 || iy < 0 || ix >= shownW_ || iy >= shownH_) return false;
    x = std::min<int64_t>(mod.w - 1, int64_t(std::floor(ix * double(mod.w) / shownW_)));
    y = std::min<int64_t>(mod.h - 1, int64_t(std::floor(iy * double(mod.h) / shownH_)));
    return true;
}

void ConstellationView::cellRect(int m, int64_t y, int64_t x, double& x0, double& y0, double& x1, double& y1) const {
    const auto& mod = trace_->module(m);
    x0 = double(x) * shownW_ / double(mod.w);
    x1 = double(x + 1) * shownW_ / double(mod.w);
    y0 = double(y) * shownH_ / double(mod.h);
    y1 = double(y + 1) * shownH_ / double(mod.h);
}

std::pair<double, double> ConstellationView::cellCentre(int m, int64_t y, int64_t x) const {
    double x0, y0, x1, y1;
    cellRect(m, y, x, x0, y0, x1, y1);
    return {0.5 * (x0 + x1), 0.5 * (y0 + y1)};
}

bool ConstellationView::clickedCell(const ConstellationViewSettings& s, int64_t& y, int64_t& x) const {
    if (s.pointX < 0 || s.pointY < 0) return false;
    return cellAt(moduleIndex(s), s.pointX, s.pointY, y, x);
}

std::vector<LegendEntry> ConstellationView::legend(int m) const {
    const auto a = trace_->assignment(m).flatten().to(torch::kInt64).contiguous();
    std::vector<int64_t> counts(size_t(trace_->clusters()), 0);
    const int64_t* p = a.data_ptr<int64_t>();
    for (int64_t i = 0; i < a.numel(); ++i)
        if (p[i] >= 0 && p[i] < int64_t(counts.size())) ++counts[size_t(p[i])];
    std::vector<LegendEntry> out;
    for (size_t k = 0; k < counts.size(); ++k)
        if (counts[k] > 0) out.push_back({int64_t(k), counts[k]});
    std::stable_sort(out.begin(), out.end(), [](const LegendEntry& a, const LegendEntry& b) { return a.cells > b.cells; });
    return out;
}

std::string ConstellationView::hoverText(int m, int64_t y, int64_t x) const {
    std::string s = "cell (" + std::to_string(y) + ", " + std::to_string(x) + "):";
    const auto top = trace_->topClusters(m, y, x, 3);
    for (size_t i = 0; i < top.size(); ++i)
        s += std::string(i ? ", #" : " #") + std::to_string(top[i].cluster) + " " + fmt("%.3f", top[i].similarity);
    return s;
}

std::string ConstellationView::relationProblem(const ConstellationViewSettings& s) const {
    const int m = moduleIndex(s);
    const auto& mod = trace_->module(m);
    if (!mod.relation) {
        std::string others;
        for (int i = 0; i < trace_->numModules(); ++i)
            if (trace_->module(i).relation) others += (others.empty() ? "" : ", ") + trace_->module(i).name;
        return "module " + mod.name + " has no cell relation attention (" +
               (others.empty() ? std::string("this model has no relation modules")
                               : "modules with relation: " + others) + ")";
    }
    int64_t y, x;
    if (!clickedCell(s, y, x)) return "click a cell to see its relation attention";
    return {};
}

torch::Tensor ConstellationView::relationMap(const ConstellationViewSettings& s) const {
    const std::string problem = relationProblem(s);
    if (!problem.empty()) throw Error("ConstellationNet: " + problem);
    int64_t y, x;
    clickedCell(s, y, x);
    const int heads = trace_->numHeads();
    return trace_->relation(moduleIndex(s), s.head >= heads ? -1 : s.head, y, x).to(torch::kFloat32).contiguous();
}

void ConstellationView::addRelation(widgets::ViewportScene& sc, const ConstellationViewSettings& s, int m) const {
    const std::string problem = relationProblem(s);
    if (!problem.empty()) {
        sc.overlayRows.push_back({"no map", problem});
        return;
    }
    const torch::Tensor map = relationMap(s);
    const auto& mod = trace_->module(m);
    // One flat colour per cell: a grid at (at most 1024 px of) the shown image's resolution
    // whose every value is its cell's weight (the renderer interpolates between grid values).
    const int ds = std::max(1, int(std::ceil(std::max(shownW_, shownH_) / 1024.0)));
    const int hw = (shownW_ + ds - 1) / ds, hh = (shownH_ + ds - 1) / ds;
    const float* v = map.data_ptr<float>();
    sc.heatW = hw;
    sc.heatH = hh;
    sc.heat.resize(size_t(hw) * hh);
    std::vector<int64_t> col(static_cast<size_t>(hw));
    for (int j = 0; j < hw; ++j) col[size_t(j)] = std::min<int64_t>(mod.w - 1, int64_t((j + 0.5) * double(mod.w) / hw));
    for (int i = 0; i < hh; ++i) {
        const int64_t cy = std::min<int64_t>(mod.h - 1, int64_t((i + 0.5) * double(mod.h) / hh));
        for (int j = 0; j < hw; ++j) sc.heat[size_t(i) * hw + j] = v[cy * mod.w + col[size_t(j)]];
    }
    sc.heatMin = map.min().item<float>();
    sc.heatMax = map.max().item<float>();
    if (!(sc.heatMax > sc.heatMin)) sc.heatMax = sc.heatMin + 1e-6f;
    sc.heatLabel = "attention";
    sc.overlayRows.push_back({"head", s.head < 0 || s.head >= trace_->numHeads() ? std::string("mean")
                                                                                 : std::to_string(s.head + 1)});
    sc.overlayRows.push_back({"range", fmt("%.4g", sc.heatMin) + " .. " + fmt("%.4g", sc.heatMax)});
}

widgets::ViewportScene ConstellationView::scene(const ConstellationViewSettings& s) const {
    widgets::ViewportScene sc;
    sc.colormap = s.colormap;
    sc.opacity = s.opacity;
    const int m = moduleIndex(s);
    const auto& mod = trace_->module(m);
    const int64_t K = trace_->clusters();
    sc.overlayRows.push_back({"ConstellationNet", constellationModeName(s.mode)});
    sc.overlayRows.push_back({"module", mod.name + " (layer " + std::to_string(mod.layer) + ")"});
    sc.overlayRows.push_back({"grid", std::to_string(mod.h) + " x " + std::to_string(mod.w) + " cells, " +
                                          std::to_string(K) + " clusters"});
    if (s.mode == ConstellationMode::Clusters) {
        const auto a = trace_->assignment(m).to(torch::kFloat32).contiguous();
        sc.heatW = int(mod.w);
        sc.heatH = int(mod.h);
        sc.heat.assign(a.data_ptr<float>(), a.data_ptr<float>() + a.numel());
        sc.heatPalette = clusterPalette(K);
        sc.heatMin = 0;
        sc.heatMax = float(std::max<int64_t>(1, K - 1));
        sc.heatLabel = "cluster";
        sc.overlayRows.push_back({"present", std::to_string(legend(m).size()) + " of " + std::to_string(K) + " clusters"});
    } else {
        addRelation(sc, s, m);
    }
    int64_t cy, cx;
    if (clickedCell(s, cy, cx)) {
        double x0, y0, x1, y1;
        cellRect(m, cy, cx, x0, y0, x1, y1);
        addRect(sc.lines, x0, y0, x1, y1, kCellMarkerRgb, 2.0f);
        sc.overlayRows.push_back({"cell", "(" + std::to_string(cy) + ", " + std::to_string(cx) + ")"});
    }
    sc.lineIds.assign(sc.lines.size(), -1);   // nothing to pick: clicks select cells
    return sc;
}

std::vector<uint8_t> clusterPalette(int64_t clusters) {
    std::vector<uint8_t> rgb;
    rgb.reserve(size_t(std::max<int64_t>(0, clusters)) * 3);
    for (int64_t k = 0; k < clusters; ++k) {
        const cv::Vec3b c = glimpse::constellation::clusterColour(k);
        rgb.insert(rgb.end(), {c[0], c[1], c[2]});
    }
    return rgb;
}

cv::Mat clusterMapImage(const torch::Tensor& assignment, int zoom) {
    const auto a = assignment.to(torch::kInt64).contiguous();
    const int h = int(a.size(0)), w = int(a.size(1));
    zoom = std::max(1, zoom);
    cv::Mat out(h * zoom, w * zoom, CV_8UC3);
    const int64_t* p = a.data_ptr<int64_t>();
    for (int y = 0; y < h * zoom; ++y)
        for (int x = 0; x < w * zoom; ++x) out.at<cv::Vec3b>(y, x) = glimpse::constellation::clusterColour(p[(y / zoom) * w + x / zoom]);
    return out;
}

} // namespace glimpse::app
