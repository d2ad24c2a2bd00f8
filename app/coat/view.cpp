#include "app/coat/view.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "renderer/colormap.h"

namespace glimpse::app {

namespace {

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

render::LineSegment seg(double x1, double y1, double x2, double y2, const float* rgb, float width) {
    render::LineSegment l;
    l.x1 = float(x1);
    l.y1 = float(y1);
    l.x2 = float(x2);
    l.y2 = float(y2);
    l.r = rgb[0];
    l.g = rgb[1];
    l.b = rgb[2];
    l.a = 1.0f;
    l.widthPx = width;
    return l;
}

void addRect(std::vector<render::LineSegment>& out, double x0, double y0, double x1, double y1, const float* rgb,
             float width) {
    out.push_back(seg(x0, y0, x1, y0, rgb, width));
    out.push_back(seg(x1, y0, x1, y1, rgb, width));
    out.push_back(seg(x1, y1, x0, y1, rgb, width));
    out.push_back(seg(x0, y1, x0, y0, rgb, width));
}

const char* kModeNames[kCoatModeCount] = {"attention (query)", "CRPE term (query)", "CLS attention", "Grad-CAM",
                                          "key channel"};

} // namespace

const char* coatModeName(CoatMode m) {
    const int i = int(m);
    return i >= 0 && i < kCoatModeCount ? kModeNames[i] : "?";
}

CoatMode coatModeFromName(const std::string& name) {
    std::string n;
    for (char c : name) n += char(std::tolower(static_cast<unsigned char>(c)));
    for (int i = 0; i < kCoatModeCount; ++i) {
        std::string full;
        for (const char* p = kModeNames[i]; *p; ++p) full += char(std::tolower(static_cast<unsigned char>(*p)));
        const std::string first = full.substr(0, full.find_first_of(" -"));
        if (n == full || n == first || (first == "grad" && n == "cam")) return CoatMode(i);
    }
    throw Error("unknown CoaT view mode '" + name + "' (attention, crpe, cls, cam, key)");
}

CoatView::CoatView(std::shared_ptr<const coat::CoatTrace> trace, int shownW, int shownH, bool shownIsCrop)
    : trace_(std::move(trace)), shownW_(shownW), shownH_(shownH) {
    if (!trace_) throw Error("CoatView: no trace");
    if (shownW < 1 || shownH < 1) throw Error("CoatView: empty shown image");
    const auto& meta = trace_->raw().meta();
    const auto img = trace_->image();
    S_ = img.size(0);
    if (shownIsCrop) {
        cropX0_ = cropY0_ = 0;
        cropW_ = shownW;
        cropH_ = shownH;
        return;
    }
    // Replays CoatModel::preprocess: shorter side -> resize (aspect kept), centre crop S.
    int64_t H0 = shownH, W0 = shownW, R = S_;
    if (meta.contains("original_size") && meta["original_size"].is_array() && meta["original_size"].size() == 2) {
        H0 = meta["original_size"][0].get<int64_t>();
        W0 = meta["original_size"][1].get<int64_t>();
    }
    if (meta.contains("config") && meta["config"].is_object()) R = meta["config"].value("resize", S_);
    if (H0 < 1 || W0 < 1) throw Error("CoaT trace: bad original_size");
    const double f = double(R) / double(std::min(H0, W0));
    const int64_t rw = std::max<int64_t>(S_, std::lround(double(W0) * f));
    const int64_t rh = std::max<int64_t>(S_, std::lround(double(H0) * f));
    const int64_t x0 = (rw - S_) / 2, y0 = (rh - S_) / 2;
    // Resized pixel -> original pixel: * W0 / rw; original -> shown: * shownW / W0.
    const double sx = double(shownW) / double(rw), sy = double(shownH) / double(rh);
    cropX0_ = double(x0) * sx;
    cropY0_ = double(y0) * sy;
    cropW_ = double(S_) * sx;
    cropH_ = double(S_) * sy;
}

bool CoatView::tokenAt(int scale, double ix, double iy, int64_t& ty, int64_t& tx) const {
    const coat::Grid g = trace_->grid(scale);
    const double cx = (ix - cropX0_) * double(S_) / cropW_, cy = (iy - cropY0_) * double(S_) / cropH_;
    if (cx < 0 || cy < 0) return false;
    tx = int64_t(std::floor(cx / stride(scale)));
    ty = int64_t(std::floor(cy / stride(scale)));
    return tx < g[1] && ty < g[0];
}

void CoatView::tokenRect(int scale, int64_t ty, int64_t tx, double& x0, double& y0, double& x1, double& y1) const {
    const double st = stride(scale);
    const double kx = cropW_ / double(S_), ky = cropH_ / double(S_);
    x0 = cropX0_ + double(tx) * st * kx;
    x1 = cropX0_ + double(tx + 1) * st * kx;
    y0 = cropY0_ + double(ty) * st * ky;
    y1 = cropY0_ + double(ty + 1) * st * ky;
}

std::pair<double, double> CoatView::queryPoint(const CoatViewSettings& s) const {
    if (s.queryX >= 0 && s.queryY >= 0) return {s.queryX, s.queryY};
    return {cropX0_ + 0.5 * cropW_, cropY0_ + 0.5 * cropH_};
}

std::pair<int64_t, int64_t> CoatView::queryToken(const CoatViewSettings& s, int scale) const {
    const auto [qx, qy] = queryPoint(s);
    const coat::Grid g = trace_->grid(scale);
    const double cx = (qx - cropX0_) * double(S_) / cropW_, cy = (qy - cropY0_) * double(S_) / cropH_;
    const int64_t tx = std::clamp<int64_t>(int64_t(std::floor(cx / stride(scale))), 0, g[1] - 1);
    const int64_t ty = std::clamp<int64_t>(int64_t(std::floor(cy / stride(scale))), 0, g[0] - 1);
    return {ty, tx};
}

int CoatView::blocksInScale(int scale) const { return int(trace_->blocksOfScale(scale).size()); }

int CoatView::blockIndex(const CoatViewSettings& s) const {
    const auto blocks = trace_->blocksOfScale(s.scale);
    if (blocks.empty()) throw Error("CoaT view: scale " + std::to_string(s.scale + 1) + " has no blocks");
    const int i = s.block < 0 || s.block >= int(blocks.size()) ? int(blocks.size()) - 1 : s.block;
    return blocks[size_t(i)];
}

int64_t CoatView::camClass(const CoatViewSettings& s) const {
    if (s.camClass >= 0) return s.camClass;
    const auto top = trace_->top5();
    return top.empty() ? 0 : top.front().classIndex;
}

bool CoatView::hasCam(int64_t cls, int scale) const {
    if (extraCams_.count({cls, scale})) return true;
    if (!trace_->hasCamScale(scale)) return false;
    for (int k = 0; k < trace_->numCams(); ++k)
        if (trace_->camClass(k) == cls) return true;
    return false;
}

void CoatView::addCam(int64_t cls, torch::Tensor map, int scale) {
    if (scale < 0 || scale > 3) throw Error("CoaT view: Grad-CAM scale must be 1..4");
    const coat::Grid g = trace_->grid(scale);
    if (!map.defined() || map.dim() != 2 || map.size(0) != g[0] || map.size(1) != g[1])
        throw Error("CoaT view: a Grad-CAM at scale " + std::to_string(scale + 1) + " must be a [" +
                    std::to_string(g[0]) + ", " + std::to_string(g[1]) + "] map");
    extraCams_[{cls, scale}] = map.to(torch::kFloat32).contiguous();
}

int CoatView::defaultCamScale() const {
    for (int s = 3; s >= 0; --s) {
        const coat::Grid g = trace_->grid(s);
        if (g[0] >= kCamMinSide && g[1] >= kCamMinSide) return s;
    }
    return 0;
}

torch::Tensor CoatView::keyGallery(const CoatViewSettings& s) const {
    return trace_->keyGallery(blockIndex(s), s.head);
}

CoatView::Map CoatView::map(const CoatViewSettings& s) const {
    Map m;
    m.scale = s.scale;
    const int b = s.mode == CoatMode::Cam ? -1 : blockIndex(s);
    const auto [ty, tx] = queryToken(s, m.scale);
    switch (s.mode) {
    case CoatMode::Attention: {
        float cls = 0;
        m.values = trace_->effectiveAttention(b, s.head, ty, tx, &cls);
        m.label = "w_j";
        m.rows.push_back({"CLS weight", fmt("%.4g", cls)});
        m.rows.push_back({"sum w_j", fmt("%.4g", double(m.values.sum().item<float>() + cls))});
        break;
    }
    case CoatMode::Crpe: {
        const coat::Grid g = trace_->grid(m.scale);
        const int H = trace_->numHeads();
        std::vector<int> heads;
        if (s.head >= 0) heads.push_back(s.head);
        else
            for (int h = 0; h < H; ++h) heads.push_back(h);
        auto acc = torch::zeros({g[0], g[1]});
        auto covered = torch::zeros({g[0], g[1]}, torch::kBool);
        double bias = 0;
        int64_t kmax = 0;
        for (int h : heads) {
            const auto w = trace_->crpeWindow(b, h, ty, tx);
            const int64_t r = w.kernel / 2;
            kmax = std::max(kmax, w.kernel);
            bias += w.bias;
            for (int64_t dy = -r; dy <= r; ++dy)
                for (int64_t dx = -r; dx <= r; ++dx) {
                    const int64_t yy = ty + dy, xx = tx + dx;
                    if (yy < 0 || xx < 0 || yy >= g[0] || xx >= g[1]) continue;
                    acc[yy][xx] += w.window[dy + r][dx + r];
                    covered[yy][xx] = true;
                }
        }
        acc /= double(heads.size());
        bias /= double(heads.size());
        m.values = torch::where(covered, acc, torch::full_like(acc, std::numeric_limits<float>::quiet_NaN()));
        m.label = "CRPE";
        m.rows.push_back({"CRPE bias", fmt("%.4g", bias)});
        m.rows.push_back({"window", std::to_string(kmax) + "x" + std::to_string(kmax) +
                                        (s.head < 0 ? " (mean of heads)" : "")});
        break;
    }
    case CoatMode::Cls:
        m.values = trace_->clsAttention(b, s.head);
        m.label = "w_j (CLS)";
        break;
    case CoatMode::Cam: {
        const int64_t c = camClass(s);
        auto it = extraCams_.find({c, m.scale});
        m.values = it != extraCams_.end() ? it->second : trace_->camForClass(c, m.scale);
        m.label = "CAM";
        const auto probs = trace_->probs();
        std::string name = "class " + std::to_string(c);
        for (const auto& p : trace_->top5())
            if (p.classIndex == c) name = p.name;
        m.rows.push_back({"class", std::to_string(c) + " " + name});
        if (c >= 0 && c < probs.size(0)) m.rows.push_back({"p", fmt("%.4f", double(probs[c].item<float>()))});
        break;
    }
    case CoatMode::KeyChannel: {
        const int64_t C = trace_->headDim(m.scale);
        const int64_t ch = std::clamp<int64_t>(s.channel, 0, C - 1);
        m.values = trace_->keyDistribution(b, s.head, ch);
        m.label = "softmax(K)";
        m.rows.push_back({"channel", std::to_string(ch + 1) + " / " + std::to_string(C)});
        break;
    }
    }
    m.values = m.values.to(torch::kFloat32).contiguous();
    const auto finite = m.values.masked_select(torch::isfinite(m.values));
    if (finite.numel() > 0) {
        m.vmin = finite.min().item<float>();
        m.vmax = finite.max().item<float>();
    }
    if (s.mode == CoatMode::Cam) m.vmin = 0.0f;   // ReLU'd and divided by its maximum
    if (!(m.vmax > m.vmin)) m.vmax = m.vmin + 1e-6f;
    m.rows.push_back({"range", fmt("%.4g", m.vmin) + " .. " + fmt("%.4g", m.vmax)});
    return m;
}

widgets::ViewportScene CoatView::scene(const CoatViewSettings& s) const {
    widgets::ViewportScene sc;
    sc.colormap = s.colormap;
    sc.opacity = s.opacity;
    const int scale = s.scale;
    sc.overlayRows.push_back({"CoaT", coatModeName(s.mode)});
    if (s.mode != CoatMode::Cam) {
        const auto info = trace_->block(blockIndex(s));
        sc.overlayRows.push_back({"scale", std::to_string(scale + 1) + " (" + std::to_string(info.grid[0]) + "x" +
                                               std::to_string(info.grid[1]) + ")"});
        sc.overlayRows.push_back({"block", info.name});
        sc.overlayRows.push_back({"head", s.head < 0 ? std::string("mean") : std::to_string(s.head + 1)});
    } else {
        // The Grad-CAM of the scale the Scale box shows (its grid; 1x1 is flat by construction).
        const coat::Grid g = trace_->grid(scale);
        sc.overlayRows.push_back({"scale", std::to_string(scale + 1) + " (" + std::to_string(g[0]) + "x" +
                                               std::to_string(g[1]) + ", Grad-CAM)"});
        if (g[0] * g[1] == 1)
            sc.overlayRows.push_back({"note", "a 1x1 map is constant: choose a finer scale"});
    }
    const bool queryMode = s.mode == CoatMode::Attention || s.mode == CoatMode::Crpe;
    const auto [qx, qy] = queryPoint(s);
    const auto [ty, tx] = queryToken(s, scale);
    if (queryMode)
        sc.overlayRows.push_back({"query", "x " + std::to_string(int(std::floor(qx))) + " y " +
                                               std::to_string(int(std::floor(qy))) + "  token (" + std::to_string(ty) +
                                               ", " + std::to_string(tx) + ")"});

    try {
        const Map m = map(s);
        for (const auto& r : m.rows) sc.overlayRows.push_back(r);
        // Heat grid over the whole shown image: each cell takes the value of the token under
        // its centre, NaN (transparent) outside the tokens.
        const int ds = std::max(1, int(std::ceil(std::max(shownW_, shownH_) / 1024.0)));
        const int hw = (shownW_ + ds - 1) / ds, hh = (shownH_ + ds - 1) / ds;
        const coat::Grid g = trace_->grid(m.scale);
        const float* v = m.values.data_ptr<float>();
        sc.heatW = hw;
        sc.heatH = hh;
        sc.heat.assign(size_t(hw) * hh, std::numeric_limits<float>::quiet_NaN());
        std::vector<int64_t> colTok(size_t(hw), -1);
        const double st = stride(m.scale);
        for (int j = 0; j < hw; ++j) {
            const double ix = (j + 0.5) * double(shownW_) / hw;
            const double cx = (ix - cropX0_) * double(S_) / cropW_;
            if (cx >= 0) {
                const int64_t t = int64_t(std::floor(cx / st));
                if (t < g[1]) colTok[size_t(j)] = t;
            }
        }
        for (int i = 0; i < hh; ++i) {
            const double iy = (i + 0.5) * double(shownH_) / hh;
            const double cy = (iy - cropY0_) * double(S_) / cropH_;
            if (cy < 0) continue;
            const int64_t t = int64_t(std::floor(cy / st));
            if (t >= g[0]) continue;
            float* row = &sc.heat[size_t(i) * hw];
            for (int j = 0; j < hw; ++j)
                if (colTok[size_t(j)] >= 0) row[j] = v[t * g[1] + colTok[size_t(j)]];
        }
        sc.heatMin = m.vmin;
        sc.heatMax = m.vmax;
        sc.heatLabel = m.label;
    } catch (const std::exception& e) {
        sc.overlayRows.push_back({"no map", e.what()});
    }

    // Crop outline (what the network saw), then the query marker on top.
    const float outlineW = 1.5f;
    addRect(sc.lines, cropX0_, cropY0_, cropX0_ + cropW_, cropY0_ + cropH_, kCropOutlineRgb, outlineW);
    if (queryMode && s.showMarker) {
        double x0, y0, x1, y1;
        tokenRect(scale, ty, tx, x0, y0, x1, y1);
        addRect(sc.lines, x0, y0, x1, y1, kQueryMarkerRgb, 2.0f);
        // Crosshair arms scale with the token but stay a fifth of the crop at most (at the
        // coarsest scale one token is the whole crop) and are clipped to the crop.
        const double arm = std::min(std::max(x1 - x0, y1 - y0) * 0.6 + 3.0 * cropW_ / std::max<double>(S_, 1),
                                    0.2 * std::min(cropW_, cropH_));
        const double cx0 = cropX0_, cx1 = cropX0_ + cropW_, cy0 = cropY0_, cy1 = cropY0_ + cropH_;
        auto armSeg = [&](double ax, double ay, double bx, double by) {
            ax = std::clamp(ax, cx0, cx1), bx = std::clamp(bx, cx0, cx1);
            ay = std::clamp(ay, cy0, cy1), by = std::clamp(by, cy0, cy1);
            if (std::abs(bx - ax) + std::abs(by - ay) > 1e-6) sc.lines.push_back(seg(ax, ay, bx, by, kQueryMarkerRgb, 2.0f));
        };
        armSeg(qx - arm, qy, qx - 0.35 * arm, qy);
        armSeg(qx + 0.35 * arm, qy, qx + arm, qy);
        armSeg(qx, qy - arm, qx, qy - 0.35 * arm);
        armSeg(qx, qy + 0.35 * arm, qx, qy + arm);
    }
    sc.lineIds.assign(sc.lines.size(), -1);   // nothing to pick: clicks set the query
    return sc;
}

std::vector<uint8_t> colorizeMap(const torch::Tensor& map, render::Colormap colormap, int zoom) {
    const auto m = map.to(torch::kFloat32).contiguous();
    const int64_t h = m.size(0), w = m.size(1);
    zoom = std::max(1, zoom);
    const float* v = m.data_ptr<float>();
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (int64_t i = 0; i < h * w; ++i)
        if (std::isfinite(v[i])) {
            lo = std::min(lo, v[i]);
            hi = std::max(hi, v[i]);
        }
    const float range = hi > lo ? hi - lo : 1.0f;
    const auto table = render::colormapTable(colormap);
    std::vector<uint8_t> out(size_t(h * zoom) * size_t(w * zoom) * 3);
    for (int64_t y = 0; y < h * zoom; ++y)
        for (int64_t x = 0; x < w * zoom; ++x) {
            const float val = v[(y / zoom) * w + x / zoom];
            const float t = std::isfinite(val) ? std::clamp((val - lo) / range, 0.0f, 1.0f) : 0.0f;
            const int e = int(std::lround(t * 255.0f));
            uint8_t* p = &out[(size_t(y) * size_t(w * zoom) + size_t(x)) * 3];
            p[0] = table[size_t(e) * 4];
            p[1] = table[size_t(e) * 4 + 1];
            p[2] = table[size_t(e) * 4 + 2];
        }
    return out;
}

torch::Tensor coatInputFromTrace(const coat::CoatTrace& trace, const coat::CoatConfig& config) {
    const auto img = trace.image();   // uint8 [S, S, 3]
    if (img.size(0) != config.imageSize || img.size(1) != config.imageSize)
        throw Error("CoaT: the trace's input is " + std::to_string(img.size(0)) + "x" + std::to_string(img.size(1)) +
                    ", the model expects " + std::to_string(config.imageSize) + "x" + std::to_string(config.imageSize));
    auto mean = torch::tensor({config.mean[0], config.mean[1], config.mean[2]}, torch::kFloat).view({3, 1, 1});
    auto stdv = torch::tensor({config.std[0], config.std[1], config.std[2]}, torch::kFloat).view({3, 1, 1});
    return (((img.permute({2, 0, 1}).to(torch::kFloat) / 255.0) - mean) / stdv).contiguous();
}

} // namespace glimpse::app
