#include "core/models/constellation/trace.h"

#include <algorithm>
#include <cmath>

#include "core/data/classification.h"
#include "core/error.h"

namespace glimpse::constellation {

namespace {

torch::Tensor imageTensor(const cv::Mat& rgb) {
    return torch::from_blob(const_cast<uint8_t*>(rgb.data), {rgb.rows, rgb.cols, 3}, torch::kUInt8).clone();
}

} // namespace

cv::Vec3b clusterColour(int64_t cluster) {
    // Golden-angle hue steps; saturation and value alternate so neighbours stay apart.
    const double hue = std::fmod(double(cluster) * 137.50776405, 360.0);
    const double s = cluster % 2 == 0 ? 0.85 : 0.6, v = cluster % 3 == 0 ? 0.95 : 0.8;
    const double c = v * s, hp = hue / 60.0, x = c * (1 - std::abs(std::fmod(hp, 2.0) - 1));
    double r = 0, g = 0, b = 0;
    if (hp < 1) r = c, g = x;
    else if (hp < 2) r = x, g = c;
    else if (hp < 3) g = c, b = x;
    else if (hp < 4) g = x, b = c;
    else if (hp < 5) r = x, b = c;
    else r = c, b = x;
    const double m = v - c;
    auto to8 = [&](double t) { return uint8_t(std::lround(std::clamp((t + m) * 255.0, 0.0, 255.0))); };
    return {to8(r), to8(g), to8(b)};
}

ConstellationTrace ConstellationTrace::capture(ConstellationModel& model, const cv::Mat& image) {
    EvalScope eval(model);
    torch::NoGradGuard ng;
    auto pre = model.preprocess(image);
    auto out = model.forward(pre.tensor.unsqueeze(0), {true, -1});
    Trace t("constellation");
    t.set("input/image", imageTensor(pre.input));
    nlohmann::json mods = nlohmann::json::array();
    for (size_t m = 0; m < out.records.size(); ++m) {
        const auto& r = out.records[m];
        t.set(key(int(m), "similarity"), r.similarity[0].to(torch::kCPU, torch::kFloat));
        if (r.attention.defined()) t.set(key(int(m), "attention"), r.attention[0].to(torch::kCPU, torch::kFloat));
        mods.push_back({{"name", r.name},
                        {"layer", r.layer},
                        {"branch", r.branch},
                        {"grid", {r.similarity.size(2), r.similarity.size(3)}},
                        {"relation", r.attention.defined()}});
    }
    auto probs = torch::softmax(out.logits[0], 0).to(torch::kCPU, torch::kFloat);
    t.set("output/probs", probs);
    auto top = probs.topk(std::min<int64_t>(5, probs.size(0)));
    nlohmann::json top5 = nlohmann::json::array();
    for (int64_t i = 0; i < std::get<1>(top).size(0); ++i) {
        const int64_t k = std::get<1>(top)[i].item<int64_t>();
        top5.push_back({{"class", k}, {"name", model.config().className(k)}, {"prob", std::get<0>(top)[i].item<float>()}});
    }
    t.meta() = {{"model", "constellation"},
                {"config", model.config().toJson()},
                {"original_size", {image.rows, image.cols}},
                {"modules", mods},
                {"top5", top5}};
    return ConstellationTrace(std::move(t));
}

ConstellationTrace::ConstellationTrace(Trace trace) : trace_(std::move(trace)) {
    const std::string what = "ConstellationNet trace: ";
    if (trace_.family() != "constellation")
        throw Error(what + "a " + trace_.family() + " trace, not a ConstellationNet one");
    const auto& meta = trace_.meta();
    try {
        for (const auto& m : meta.at("modules")) {
            TraceModule tm;
            tm.name = m.at("name").get<std::string>();
            tm.layer = m.at("layer").get<int64_t>();
            tm.branch = m.at("branch").get<int>();
            tm.h = m.at("grid").at(0).get<int64_t>();
            tm.w = m.at("grid").at(1).get<int64_t>();
            tm.relation = m.at("relation").get<bool>();
            modules_.push_back(tm);
        }
        meta.at("original_size").at(1).get<int64_t>();
        meta.at("top5").size();
    } catch (const nlohmann::json::exception& e) {
        throw Error(what + "incomplete metadata (" + e.what() + ")");
    }
    const auto& img = trace_.get("input/image", {-1, -1, 3});
    if (img.scalar_type() != torch::kUInt8 || img.size(0) != img.size(1)) throw Error(what + "input/image is not S x S x 3 uint8");
    int64_t K = -1;
    for (int m = 0; m < numModules(); ++m) {
        const auto& mod = modules_[size_t(m)];
        const auto& s = trace_.get(key(m, "similarity"), {-1, mod.h, mod.w});
        if (K >= 0 && s.size(0) != K) throw Error(what + key(m, "similarity") + " has another cluster count");
        K = s.size(0);
        if (mod.relation) {
            const auto& a = trace_.get(key(m, "attention"), {-1, mod.h * mod.w, mod.h * mod.w});
            if (a.size(0) < 1) throw Error(what + key(m, "attention") + " has no heads");
        }
    }
    trace_.get("output/probs", {-1});
}

ConstellationTrace ConstellationTrace::load(const std::string& path) {
    try {
        return ConstellationTrace(Trace::load(path));
    } catch (const Error& e) {
        const std::string msg = e.what();
        if (msg.rfind(path, 0) == 0) throw;
        throw Error(path + ": " + msg);
    }
}

void ConstellationTrace::checkModule(int m) const {
    if (m < 0 || m >= numModules())
        throw Error("ConstellationNet trace: no module " + std::to_string(m) + " (it has " +
                    std::to_string(numModules()) + ")");
}

const TraceModule& ConstellationTrace::module(int m) const {
    checkModule(m);
    return modules_[size_t(m)];
}

int64_t ConstellationTrace::clusters() const { return numModules() ? similarity(0).size(0) : 0; }

int ConstellationTrace::numHeads() const {
    for (int m = 0; m < numModules(); ++m)
        if (modules_[size_t(m)].relation) return int(trace_.get(key(m, "attention")).size(0));
    return 0;
}

torch::Tensor ConstellationTrace::image() const { return trace_.get("input/image"); }
int64_t ConstellationTrace::inputSize() const { return image().size(0); }

std::pair<int64_t, int64_t> ConstellationTrace::originalSize() const {
    const auto& o = trace_.meta().at("original_size");
    return {o.at(0).get<int64_t>(), o.at(1).get<int64_t>()};
}

torch::Tensor ConstellationTrace::similarity(int m) const {
    checkModule(m);
    return trace_.get(key(m, "similarity"));
}

torch::Tensor ConstellationTrace::assignment(int m) const { return similarity(m).argmax(0); }

std::vector<ClusterScore> ConstellationTrace::topClusters(int m, int64_t y, int64_t x, int n) const {
    const auto& mod = module(m);
    if (y < 0 || y >= mod.h || x < 0 || x >= mod.w)
        throw Error("ConstellationNet trace: cell (" + std::to_string(y) + ", " + std::to_string(x) +
                    ") is outside the " + std::to_string(mod.h) + "x" + std::to_string(mod.w) + " grid of " + mod.name);
    auto cell = similarity(m).index({torch::indexing::Slice(), y, x});
    auto top = cell.topk(std::min<int64_t>(n, cell.size(0)));
    std::vector<ClusterScore> out;
    for (int64_t i = 0; i < std::get<1>(top).size(0); ++i)
        out.push_back({std::get<1>(top)[i].item<int64_t>(), std::get<0>(top)[i].item<float>()});
    return out;
}

torch::Tensor ConstellationTrace::relation(int m, int head, int64_t y, int64_t x) const {
    const auto& mod = module(m);
    if (!mod.relation) throw Error("ConstellationNet trace: module " + mod.name + " has no cell relation attention");
    const auto& a = trace_.get(key(m, "attention"));
    if (head < -1 || head >= a.size(0)) throw Error("ConstellationNet trace: no head " + std::to_string(head));
    if (y < 0 || y >= mod.h || x < 0 || x >= mod.w) throw Error("ConstellationNet trace: cell outside the grid");
    auto rows = a.index({torch::indexing::Slice(), y * mod.w + x});   // [heads, hw]
    auto r = head < 0 ? rows.mean(0) : rows[head];
    return r.view({mod.h, mod.w});
}

std::vector<ClassScore> ConstellationTrace::top5() const {
    std::vector<ClassScore> out;
    for (const auto& t : trace_.meta().at("top5"))
        out.push_back({t.at("class").get<int64_t>(), t.at("name").get<std::string>(), t.at("prob").get<float>()});
    return out;
}

std::vector<GalleryPatch> clusterGallery(ConstellationModel& model, const data::ClassificationDataset& ds,
                                         const std::string& moduleName, int64_t cluster, int count,
                                         int64_t maxImages, const std::function<bool()>& cancelled) {
    int index = -1;
    auto mods = model.constellationModules();
    for (size_t i = 0; i < mods.size(); ++i)
        if (mods[i].name == moduleName) index = int(i);
    if (index < 0) throw Error("ConstellationNet: no constellation module named '" + moduleName + "'");
    if (cluster < 0 || cluster >= model.config().clusters)
        throw Error("ConstellationNet: no cluster " + std::to_string(cluster) + " (the model has " +
                    std::to_string(model.config().clusters) + ")");
    EvalScope eval(model);
    torch::NoGradGuard ng;
    const int64_t n = maxImages > 0 ? std::min(maxImages, ds.size()) : ds.size();
    std::vector<GalleryPatch> best;
    const int64_t batch = 64;
    for (int64_t start = 0; start < n; start += batch) {
        if (cancelled && cancelled()) break;
        std::vector<torch::Tensor> xs;
        std::vector<cv::Mat> inputs;
        for (int64_t i = start; i < std::min(n, start + batch); ++i) {
            auto pre = model.preprocess(ds.get(i).image);
            xs.push_back(pre.tensor);
            inputs.push_back(pre.input);
        }
        auto out = model.forward(torch::stack(xs), {true, 1});
        auto sim = out.records[size_t(index)].similarity.select(1, cluster).to(torch::kCPU);   // [b, h, w]
        const int64_t h = sim.size(1), w = sim.size(2), S = model.config().imageSize;
        auto flat = sim.flatten(1).max(1);
        for (int64_t b = 0; b < sim.size(0); ++b) {
            const int64_t cell = std::get<1>(flat)[b].item<int64_t>();
            GalleryPatch p{start + b, cell / w, cell % w, std::get<0>(flat)[b].item<float>(), {}};
            const int cs = int(S / h), cx = int(p.x * S / w + S / (2 * w)), cy = int(p.y * S / h + S / (2 * h));
            const int half = std::max(cs, 2);
            cv::Rect r(cx - half, cy - half, 2 * half, 2 * half);
            p.patch = inputs[size_t(b)](r & cv::Rect(0, 0, int(S), int(S))).clone();
            best.push_back(std::move(p));
        }
        std::sort(best.begin(), best.end(), [](const auto& a, const auto& c) { return a.similarity > c.similarity; });
        if (int(best.size()) > count) best.resize(size_t(count));
    }
    return best;
}

} // namespace glimpse::constellation
