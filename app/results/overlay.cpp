#include "app/results/overlay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <opencv2/imgproc.hpp>

namespace glimpse::app::results_view {

namespace {

render::LineSegment segment(float x1, float y1, float x2, float y2, const float* rgb, float width) {
    render::LineSegment s;
    s.x1 = x1;
    s.y1 = y1;
    s.x2 = x2;
    s.y2 = y2;
    s.r = rgb[0];
    s.g = rgb[1];
    s.b = rgb[2];
    s.a = 1.0f;
    s.widthPx = width;
    return s;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// A dashed line as separate segments: dashes of `dash` image pixels with equal gaps.
void addDashed(std::vector<render::LineSegment>& out, const eval::GtLine& g, float dash) {
    const float dx = g.x2 - g.x1, dy = g.y2 - g.y1;
    const float len = std::hypot(dx, dy);
    if (len <= 0) return;
    const int n = std::max(1, int(std::floor(len / dash)));
    for (int k = 0; k < n; k += 2) {
        const float t0 = float(k) / n, t1 = float(std::min(k + 1, n)) / n;
        out.push_back(segment(g.x1 + t0 * dx, g.y1 + t0 * dy, g.x1 + t1 * dx, g.y1 + t1 * dy, kMissedRgb, kLineWidthPx));
    }
}

void addFrame(render::ViewportScene& sc, float x0, float y0, float x1, float y1, const float* rgb, float width,
              int id = -1, const std::string& label = {}) {
    const float xs[4][4] = {{x0, y0, x1, y0}, {x1, y0, x1, y1}, {x1, y1, x0, y1}, {x0, y1, x0, y0}};
    for (const auto& e : xs) {
        sc.lines.push_back(segment(e[0], e[1], e[2], e[3], rgb, width));
        sc.lineIds.push_back(id);
        sc.lineLabels.push_back(label);
    }
}

} // namespace

LetrOverlay letrOverlay(const std::vector<glimpse::results::LineRecord>& lines, const std::vector<eval::GtLine>& gt,
                        size_t threshold, float minScore, int width, int height) {
    LetrOverlay o;
    std::vector<char> matched(gt.size(), 0);
    std::vector<int> tps;
    for (size_t i = 0; i < lines.size(); ++i) {
        const auto& l = lines[i];
        if (!(l.score >= minScore)) continue;
        if (l.isTp(threshold)) {
            ++o.tp;
            tps.push_back(int(i));
            if (l.gt >= 0 && size_t(l.gt) < gt.size()) matched[size_t(l.gt)] = 1;
        } else {
            ++o.fp;
            o.fpLines.push_back(int(i));
        }
    }
    // The dash length follows the image size so that dashes read at any zoom.
    const float dash = std::max(3.0f, float(std::hypot(width, height)) / 90.0f);
    for (size_t g = 0; g < gt.size(); ++g) {
        if (matched[g]) continue;
        ++o.missed;
        const size_t before = o.lines.size();
        addDashed(o.lines, gt[g], dash);
        for (size_t k = before; k < o.lines.size(); ++k) {
            o.ids.push_back(-1);
            o.labels.push_back("missed ground truth " + std::to_string(g));
        }
    }
    auto add = [&](int i, const float* rgb, const char* what) {
        const auto& l = lines[size_t(i)];
        o.lines.push_back(segment(l.x1, l.y1, l.x2, l.y2, rgb, kLineWidthPx));
        o.ids.push_back(i);
        o.labels.push_back(std::string(what) + fmt(" %.3f", l.score));
    };
    // Lowest score first within each kind, true positives on top.
    for (auto it = o.fpLines.rbegin(); it != o.fpLines.rend(); ++it) add(*it, kFpRgb, "false positive, score");
    for (auto it = tps.rbegin(); it != tps.rend(); ++it) add(*it, kTpRgb, "true positive, score");
    return o;
}

render::ViewportScene letrScene(const LetrOverlay& o, std::vector<std::pair<std::string, std::string>> rows) {
    render::ViewportScene sc;
    sc.lines = o.lines;
    sc.lineIds = o.ids;
    sc.lineLabels = o.labels;
    rows.push_back({"matched (green)", std::to_string(o.tp)});
    rows.push_back({"false pos. (red)", std::to_string(o.fp)});
    rows.push_back({"missed GT (dashed)", std::to_string(o.missed)});
    sc.overlayRows = std::move(rows);
    return sc;
}

render::ViewportScene classScene(int width, int height, const std::string& label, const std::string& predicted,
                                 bool correct, const std::vector<std::pair<std::string, float>>& top5) {
    render::ViewportScene sc;
    const float w = std::max(2.0f, float(std::min(width, height)) / 40.0f);
    addFrame(sc, w / 2, w / 2, float(width) - w / 2, float(height) - w / 2, correct ? kTpRgb : kFpRgb, 4.0f);
    sc.overlayRows.push_back({"label", label});
    sc.overlayRows.push_back({"predicted", predicted + (correct ? "  (correct)" : "  (wrong)")});
    for (size_t k = 0; k < top5.size(); ++k)
        sc.overlayRows.push_back({"top " + std::to_string(k + 1), top5[k].first + fmt("  %.3f", top5[k].second)});
    return sc;
}

cv::Mat toRgb8(const cv::Mat& image) {
    cv::Mat out;
    if (image.channels() == 1) cv::cvtColor(image, out, cv::COLOR_GRAY2RGB);
    else if (image.channels() == 4) cv::cvtColor(image, out, cv::COLOR_RGBA2RGB);
    else out = image.clone();
    if (out.depth() != CV_8U) out.convertTo(out, CV_8U);
    return out;
}

EpisodeMosaic episodeMosaic(const glimpse::results::EpisodeIn& e, const glimpse::results::FewShotSetting& s,
                            const std::vector<cv::Mat>& tiles, const std::vector<std::string>& classNames, int tile) {
    EpisodeMosaic m;
    m.tile = tile;
    const int ways = int(s.ways), shots = int(s.shots), queries = int(s.queries);
    const int gap = std::max(2, tile / 12), sep = tile / 2;   // sep: between supports and queries
    const int cols = shots + queries;
    const int W = cols * (tile + gap) + sep + gap, H = ways * (tile + gap) + gap;
    m.rgb = cv::Mat(H, W, CV_8UC3, cv::Scalar(28, 28, 28));
    auto place = [&](size_t k, int row, int col, bool query) -> cv::Rect {
        const int x = gap + col * (tile + gap) + (query ? sep : 0), y = gap + row * (tile + gap);
        const cv::Rect r(x, y, tile, tile);
        if (k < tiles.size() && !tiles[k].empty()) {
            cv::Mat t;
            cv::resize(toRgb8(tiles[k]), t, cv::Size(tile, tile), 0, 0, cv::INTER_AREA);
            t.copyTo(m.rgb(r));
        }
        return r;
    };
    const float fw = std::max(2.0f, tile / 20.0f);
    for (int w = 0; w < ways; ++w) {
        const int64_t cls = w < int(e.classes.size()) ? e.classes[size_t(w)] : -1;
        const std::string name = cls >= 0 && cls < int64_t(classNames.size()) ? classNames[size_t(cls)]
                                                                              : "class " + std::to_string(cls);
        for (int k = 0; k < shots; ++k) {
            const cv::Rect r = place(size_t(w * shots + k), w, k, false);
            addFrame(m.scene, r.x - fw / 2, r.y - fw / 2, r.x + r.width + fw / 2, r.y + r.height + fw / 2, kSupportRgb,
                     fw, -1, "support of way " + std::to_string(w) + " (" + name + ")");
        }
        for (int q = 0; q < queries; ++q) {
            const size_t qi = size_t(w * queries + q);
            const cv::Rect r = place(size_t(ways * shots) + qi, w, shots + q, true);
            const int64_t pred = qi < e.predicted.size() ? e.predicted[qi] : -1;
            const bool ok = pred == w;
            if (!ok) ++m.wrong;
            std::string predName = "?";
            if (pred >= 0 && pred < int64_t(e.classes.size())) {
                const int64_t pc = e.classes[size_t(pred)];
                predName = pc >= 0 && pc < int64_t(classNames.size()) ? classNames[size_t(pc)] : std::to_string(pc);
            }
            addFrame(m.scene, r.x - fw / 2, r.y - fw / 2, r.x + r.width + fw / 2, r.y + r.height + fw / 2,
                     ok ? kTpRgb : kFpRgb, fw, int(qi),
                     "query " + std::to_string(qi) + ": " + name + " -> " + predName);
        }
    }
    m.scene.overlayRows.push_back({"episode", std::to_string(e.episode)});
    m.scene.overlayRows.push_back({"setting", std::to_string(ways) + "-way " + std::to_string(shots) + "-shot, " +
                                                  std::to_string(queries) + " queries per way"});
    m.scene.overlayRows.push_back({"accuracy", fmt("%.1f %%", 100.0 * e.accuracy)});
    m.scene.overlayRows.push_back({"wrong queries (red)", std::to_string(m.wrong)});
    m.scene.overlayRows.push_back({"rows", "one way each: supports (blue), then queries"});
    return m;
}

void rasterizeLines(cv::Mat& rgb, const std::vector<render::LineSegment>& lines, double scale) {
    for (const auto& l : lines) {
        const int t = std::max(1, int(std::lround(l.widthPx * std::min(1.0, scale * 1.5))));
        const cv::Scalar c(std::clamp(l.r, 0.f, 1.f) * 255, std::clamp(l.g, 0.f, 1.f) * 255,
                           std::clamp(l.b, 0.f, 1.f) * 255);
        // Sub-pixel endpoints (4 fractional bits), anti-aliased.
        const int shift = 4;
        const double f = scale * (1 << shift);
        cv::line(rgb, cv::Point(int(std::lround(l.x1 * f)), int(std::lround(l.y1 * f))),
                 cv::Point(int(std::lround(l.x2 * f)), int(std::lround(l.y2 * f))), c, t, cv::LINE_AA, shift);
    }
}

cv::Mat contactSheet(const std::vector<SheetTile>& tiles, int columns, int tileSide) {
    columns = std::max(1, std::min(columns, int(tiles.size())));
    const int rows = (int(tiles.size()) + columns - 1) / columns;
    const int caption = 20, gap = 6;
    const int cellW = tileSide + gap, cellH = tileSide + caption + gap;
    cv::Mat sheet(std::max(1, rows * cellH + gap), std::max(1, columns * cellW + gap), CV_8UC3, cv::Scalar(24, 24, 24));
    for (size_t k = 0; k < tiles.size(); ++k) {
        const int col = int(k) % columns, row = int(k) / columns;
        const int x0 = gap + col * cellW, y0 = gap + row * cellH;
        const cv::Mat& img = tiles[k].rgb;
        if (!img.empty()) {
            const double s = std::min(double(tileSide) / img.cols, double(tileSide) / img.rows);
            cv::Mat t;
            cv::resize(img, t, cv::Size(std::max(1, int(img.cols * s)), std::max(1, int(img.rows * s))), 0, 0,
                       s < 1 ? cv::INTER_AREA : cv::INTER_LINEAR);
            t.copyTo(sheet(cv::Rect(x0 + (tileSide - t.cols) / 2, y0 + (tileSide - t.rows) / 2, t.cols, t.rows)));
        }
        double fs = 0.4;
        int base = 0;
        const int tw = cv::getTextSize(tiles[k].caption, cv::FONT_HERSHEY_SIMPLEX, fs, 1, &base).width;
        if (tw > tileSide) fs = std::max(0.25, fs * tileSide / tw);
        cv::putText(sheet, tiles[k].caption, cv::Point(x0, y0 + tileSide + caption - 6), cv::FONT_HERSHEY_SIMPLEX, fs,
                    cv::Scalar(235, 235, 235), 1, cv::LINE_AA);
    }
    return sheet;
}

} // namespace glimpse::app::results_view
