#include "app/letr/view.h"

#include <algorithm>
#include <dlfcn.h>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/error.h"
#include "core/io/atomic_file.h"
#include "core/util/path.h"

namespace glimpse::app {

using letr::Stage;

std::string LetrPosition::label() const {
    return std::string(letr::stageName(stage)) + " " + std::to_string(layer + 1);
}

std::vector<LetrPosition> letrPositions(const letr::LetrTrace& trace) {
    std::vector<LetrPosition> out;
    for (int s = 0; s < trace.numStages(); ++s)
        for (int l = 0; l < trace.numLayers(Stage(s)); ++l) out.push_back({Stage(s), l});
    return out;
}

render::LineSegment scoreColoredLine(float x1, float y1, float x2, float y2, float score) {
    const float t = std::clamp(score, 0.0f, 1.0f);
    render::LineSegment l;
    l.x1 = x1; l.y1 = y1; l.x2 = x2; l.y2 = y2;
    l.r = t;
    l.g = 0.85f + 0.1f * t;
    l.b = 1.0f - t;
    l.a = 1.0f;
    l.widthPx = kLineWidthPx;
    return l;
}

render::LineSegment edgeColoredLine(float x1, float y1, float x2, float y2, float support) {
    const cv::Vec3b c = eval::edgeSupportColour(double(support));
    render::LineSegment l;
    l.x1 = x1; l.y1 = y1; l.x2 = x2; l.y2 = y2;
    l.r = float(c[0]) / 255.0f;
    l.g = float(c[1]) / 255.0f;
    l.b = float(c[2]) / 255.0f;
    l.a = 1.0f;
    l.widthPx = kLineWidthPx;
    return l;
}

namespace {
// A line's hover label: entity, score, and its edge support once known.
std::string lineLabel(const LetrEntityRow& r, bool selected) {
    char buf[96];
    if (std::isnan(r.edge))
        std::snprintf(buf, sizeof buf, "entity %d  score %.3f%s", r.entity, double(r.score), selected ? " (selected)" : "");
    else
        std::snprintf(buf, sizeof buf, "entity %d  score %.3f  edge %.0f%%%s", r.entity, double(r.score),
                      100.0 * double(r.edge), selected ? " (selected)" : "");
    return buf;
}
} // namespace

LetrView::LetrView(std::shared_ptr<const letr::LetrTrace> trace) : trace_(std::move(trace)) {
    if (!trace_) throw Error("LetrView: no trace");
    positions_ = letrPositions(*trace_);
    rows_.resize(positions_.size());
    heads_.resize(positions_.size());
    lines_.resize(positions_.size());
}

void LetrView::setEdgeField(std::shared_ptr<const eval::EdgeField> field) {
    edgeField_ = std::move(field);
    for (auto& rows : rows_) fillEdges(rows);
    for (Lines& l : lines_) l = Lines{};   // colours and labels change
}

void LetrView::fillEdges(std::vector<LetrEntityRow>& rows) const {
    for (LetrEntityRow& r : rows)
        r.edge = edgeField_ ? float(eval::lineSupport(*edgeField_, r.x1, r.y1, r.x2, r.y2))
                            : std::numeric_limits<float>::quiet_NaN();
}

void LetrView::checkPosition(int position) const {
    if (position < 0 || position >= int(positions_.size()))
        throw Error("LETR view: layer position " + std::to_string(position) + " out of range 0.." +
                    std::to_string(int(positions_.size()) - 1));
}

const std::vector<LetrEntityRow>& LetrView::entities(int position) {
    checkPosition(position);
    auto& rows = rows_[size_t(position)];
    if (!rows.empty()) return rows;
    const LetrPosition& p = positions_[size_t(position)];
    const torch::Tensor ep = trace_->endpoints(p.stage, p.layer).to(torch::kFloat32).contiguous();
    const torch::Tensor sc = trace_->scores(p.stage, p.layer).to(torch::kFloat32).contiguous();
    const float* e = ep.data_ptr<float>();
    const float* s = sc.data_ptr<float>();
    const int64_t n = sc.size(0);
    rows.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
        LetrEntityRow& r = rows[size_t(i)];
        r.entity = int(i);
        r.score = s[i];
        r.x1 = e[i * 4 + 0]; r.y1 = e[i * 4 + 1]; r.x2 = e[i * 4 + 2]; r.y2 = e[i * 4 + 3];
        const float dx = r.x2 - r.x1, dy = r.y2 - r.y1;
        r.length = std::hypot(dx, dy);
        float a = float(std::atan2(-dy, dx) * 180.0 / M_PI);   // image y points down
        if (a < 0) a += 180.0f;
        if (a >= 180.0f) a -= 180.0f;
        r.angle = a;
    }
    if (edgeField_) fillEdges(rows);
    return rows;
}

std::vector<LetrEntityRow> LetrView::visible(int position, float threshold) {
    const auto& all = entities(position);
    std::vector<LetrEntityRow> out;
    out.reserve(all.size());
    for (const auto& r : all)
        if (r.score >= threshold) out.push_back(r);
    std::stable_sort(out.begin(), out.end(),
                     [](const LetrEntityRow& a, const LetrEntityRow& b) { return a.score > b.score; });
    return out;
}

const std::vector<float>& LetrView::attention(int position, int head, int entity, int& h, int& w) {
    checkPosition(position);
    if (entity < 0) {
        static const std::vector<float> none;
        h = w = 0;
        return none;
    }
    if (position != attnPos_ || head != attnHead_ || entity != attnEntity_) {
        if (entity != headsEntity_) {
            for (Heads& hs : heads_) hs = Heads{};
            headsEntity_ = entity;
        }
        Heads& hs = heads_[size_t(position)];
        if (hs.maps.empty()) {
            // Every head in one key product (what the mean needs anyway): switching heads of
            // the same entity and layer then needs no recomputation.
            const LetrPosition& p = positions_[size_t(position)];
            const torch::Tensor a = trace_->attentionHeads(p.stage, p.layer, entity).contiguous();
            hs.h = int(a.size(1));
            hs.w = int(a.size(2));
            hs.maps.assign(a.data_ptr<float>(), a.data_ptr<float>() + a.numel());
            ++attnComputations_;
        }
        attnH_ = hs.h;
        attnW_ = hs.w;
        const size_t cells = size_t(attnH_) * size_t(attnW_);
        const int nh = int(hs.maps.size() / std::max<size_t>(cells, 1));
        if (head >= 0) {
            attn_.assign(hs.maps.begin() + ptrdiff_t(size_t(head) * cells),
                         hs.maps.begin() + ptrdiff_t(size_t(head + 1) * cells));
        } else {
            attn_.assign(hs.maps.begin(), hs.maps.begin() + ptrdiff_t(cells));
            for (int k = 1; k < nh; ++k) {
                const float* src = hs.maps.data() + size_t(k) * cells;
                for (size_t i = 0; i < cells; ++i) attn_[i] += src[i];
            }
            const float inv = 1.0f / float(nh);
            for (float& v : attn_) v *= inv;
        }
        attnPos_ = position;
        attnHead_ = head;
        attnEntity_ = entity;
    }
    h = attnH_;
    w = attnW_;
    return attn_;
}

const LetrView::Lines& LetrView::visibleLines(int position, float threshold, LineColour colour) {
    checkPosition(position);
    // Kept for every position at one threshold and colouring: a layer change back to a layer
    // already drawn, or an entity change, reuses them; another threshold or colouring rebuilds.
    if ((threshold != linesThreshold_ && !(std::isnan(threshold) && std::isnan(linesThreshold_))) ||
        colour != linesColour_) {
        for (Lines& l : lines_) l = Lines{};
        linesThreshold_ = threshold;
        linesColour_ = colour;
    }
    Lines& out = lines_[size_t(position)];
    if (out.built) return out;
    const std::vector<LetrEntityRow> vis = visible(position, threshold);
    out.lines.reserve(vis.size());
    out.ids.reserve(vis.size());
    out.labels.reserve(vis.size());
    for (auto it = vis.rbegin(); it != vis.rend(); ++it) {   // lowest score first
        const bool byEdge = colour == LineColour::EdgeSupport && !std::isnan(it->edge);
        out.lines.push_back(byEdge ? edgeColoredLine(it->x1, it->y1, it->x2, it->y2, it->edge)
                                   : scoreColoredLine(it->x1, it->y1, it->x2, it->y2, it->score));
        out.ids.push_back(it->entity);
        out.labels.push_back(lineLabel(*it, false));
        if (it->edge >= eval::EdgeSupportOptions{}.minSupport) ++out.onEdge;
    }
    out.built = true;
    ++lineBuilds_;
    return out;
}

widgets::ViewportScene LetrView::scene(const LetrViewSettings& s) {
    checkPosition(s.position);
    widgets::ViewportScene sc;
    const auto& all = entities(s.position);
    const bool selected = s.entity >= 0 && s.entity < int(all.size());
    // A selection the threshold hides is not drawn (neither its line nor its map): the
    // overlay says why.
    const bool haveEntity = selected && all[size_t(s.entity)].score >= s.threshold;
    const Lines& vis = visibleLines(s.position, s.threshold, s.lineColour);
    if (s.showLines) {
        sc.lines.reserve(vis.lines.size() + 1);
        sc.lineIds.reserve(vis.lines.size() + 1);
        sc.lineLabels.reserve(vis.lines.size() + 1);
        // The selected entity is drawn last (on top, in red) below: copy the runs around it.
        const auto sel = haveEntity ? std::find(vis.ids.begin(), vis.ids.end(), s.entity) : vis.ids.end();
        const size_t cut = size_t(sel - vis.ids.begin());
        const size_t resume = sel == vis.ids.end() ? cut : cut + 1;
        sc.lines.assign(vis.lines.begin(), vis.lines.begin() + ptrdiff_t(cut));
        sc.lines.insert(sc.lines.end(), vis.lines.begin() + ptrdiff_t(resume), vis.lines.end());
        sc.lineIds.assign(vis.ids.begin(), vis.ids.begin() + ptrdiff_t(cut));
        sc.lineIds.insert(sc.lineIds.end(), vis.ids.begin() + ptrdiff_t(resume), vis.ids.end());
        sc.lineLabels.assign(vis.labels.begin(), vis.labels.begin() + ptrdiff_t(cut));
        sc.lineLabels.insert(sc.lineLabels.end(), vis.labels.begin() + ptrdiff_t(resume), vis.labels.end());
    }
    if (haveEntity) {
        const LetrEntityRow& r = all[size_t(s.entity)];
        const float* rgb = s.lineColour == LineColour::EdgeSupport ? kSelectedEdgeModeRgb : kSelectedRgb;
        render::LineSegment l{r.x1, r.y1, r.x2, r.y2, rgb[0], rgb[1], rgb[2], 1.0f, kSelectedWidthPx};
        sc.lines.push_back(l);
        sc.lineIds.push_back(r.entity);
        sc.lineLabels.push_back(lineLabel(r, true));
        if (s.showHeatmap) {
            int h = 0, w = 0;
            const auto& a = attention(s.position, s.head, s.entity, h, w);
            sc.heatW = w;
            sc.heatH = h;
            sc.heat = a;
            sc.heatMin = 0.0f;
            const float mx = a.empty() ? 1.0f : *std::max_element(a.begin(), a.end());
            sc.heatMax = mx > 0 ? mx : 1.0f;
            sc.heatLabel = "attention";
        }
    }
    sc.colormap = s.colormap;
    sc.opacity = s.opacity;
    const LetrPosition& p = positions_[size_t(s.position)];
    sc.overlayRows.push_back({"layer", p.label()});
    sc.overlayRows.push_back({"head", s.head < 0 ? std::string("mean of ") + std::to_string(trace_->numHeads())
                                                 : std::to_string(s.head + 1) + " / " + std::to_string(trace_->numHeads())});
    if (haveEntity) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f", double(all[size_t(s.entity)].score));
        sc.overlayRows.push_back({"entity", std::to_string(s.entity)});
        sc.overlayRows.push_back({"score", buf});
    } else if (selected) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%d hidden (score %.3f < threshold %g)", s.entity,
                      double(all[size_t(s.entity)].score), double(s.threshold));
        sc.overlayRows.push_back({"entity", buf});
    } else {
        sc.overlayRows.push_back({"entity", "none (click a line)"});
    }
    sc.overlayRows.push_back({"lines", std::to_string(vis.lines.size()) + " of " + std::to_string(all.size())});
    if (s.lineColour == LineColour::EdgeSupport) {
        sc.overlayRows.push_back({"on an edge", edgeField_ ? std::to_string(vis.onEdge) + " of " +
                                                                 std::to_string(vis.lines.size())
                                                           : std::string("measuring...")});
    }
    return sc;
}

widgets::ViewportScene lsdScene(const std::vector<eval::ScoredLine>& lines, LineColour colour,
                                const eval::EdgeField* field, const std::string& name) {
    widgets::ViewportScene sc;
    const size_t n = lines.size();
    const bool byEdge = colour == LineColour::EdgeSupport && field;
    const eval::EdgeSupportOptions o;
    size_t on = 0;
    for (size_t i = n; i-- > 0;) {   // strongest drawn last (on top)
        const auto& l = lines[i];
        if (byEdge) {
            const float support = float(eval::lineSupport(*field, l.x1, l.y1, l.x2, l.y2, o));
            if (support >= o.minSupport) ++on;
            sc.lines.push_back(edgeColoredLine(l.x1, l.y1, l.x2, l.y2, support));
        } else {
            const float t = n > 1 ? 1.0f - float(i) / float(n - 1) : 1.0f;
            sc.lines.push_back(scoreColoredLine(l.x1, l.y1, l.x2, l.y2, t));
        }
        sc.lineIds.push_back(-1);
        sc.lineLabels.emplace_back();
    }
    sc.overlayRows.push_back({"layer", name});
    sc.overlayRows.push_back({"lines", std::to_string(n)});
    if (colour == LineColour::EdgeSupport)
        sc.overlayRows.push_back({"on an edge", byEdge ? std::to_string(on) + " of " + std::to_string(n) : "measuring..."});
    return sc;
}

void writeLines(const std::string& path, const std::string& layerLabel,
                const std::vector<LetrEntityRow>& rows) {
    const std::string ext = lowerExtension(path);
    std::string text;
    if (ext == ".json") {
        nlohmann::json j;
        j["layer"] = layerLabel;
        j["lines"] = nlohmann::json::array();
        for (const auto& r : rows)
            j["lines"].push_back({{"entity", r.entity}, {"score", r.score}, {"x1", r.x1}, {"y1", r.y1},
                                  {"x2", r.x2}, {"y2", r.y2}, {"length", r.length}, {"angle", r.angle},
                                  {"edge", std::isnan(r.edge) ? nlohmann::json(nullptr) : nlohmann::json(r.edge)}});
        text = j.dump(1) + "\n";
    } else if (ext == ".csv") {
        std::ostringstream os;
        os.precision(7);
        os << "entity,score,x1,y1,x2,y2,length,angle,edge\n";
        for (const auto& r : rows) {
            os << r.entity << ',' << r.score << ',' << r.x1 << ',' << r.y1 << ',' << r.x2 << ','
               << r.y2 << ',' << r.length << ',' << r.angle << ',';
            if (!std::isnan(r.edge)) os << r.edge;
            os << '\n';
        }
        text = os.str();
    } else {
        throw Error(path + ": unknown line export format (use a .json or .csv file name)");
    }
    writeBytesAtomically(path, text.data(), text.size());
}

} // namespace glimpse::app
