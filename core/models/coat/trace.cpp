#include "core/models/coat/trace.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "core/util/autocast.h"

namespace glimpse::coat {

namespace {

Grid pairOf(const nlohmann::json& j, const char* what) {
    if (!j.is_array() || j.size() != 2 || !j[0].is_number_integer() || !j[1].is_number_integer())
        throw Error(std::string("CoaT trace: meta '") + what + "' must be [int, int]");
    return {j[0].get<int64_t>(), j[1].get<int64_t>()};
}

// Bounds of a plausible trace: a crafted file beyond them is refused, and no product of two of
// them can overflow.
constexpr int64_t kMaxHeads = 4096, kMaxHeadDim = int64_t(1) << 20, kMaxGridCells = int64_t(1) << 24,
                  kMaxCrpeKernel = 255;

// config.crpe_window as (kernel, heads) per head group, checked: a non-empty array of integer
// pairs, odd kernels, head counts summing to num_heads (so every head has a group).
std::vector<std::pair<int64_t, int64_t>> crpeGroups(const nlohmann::json& c, int64_t numHeads) {
    if (!c.contains("crpe_window"))
        throw Error("CoaT trace: meta config has use_crpe = true but no 'crpe_window'");
    const auto& win = c["crpe_window"];
    if (!win.is_array() || win.empty())
        throw Error("CoaT trace: meta config 'crpe_window' must be a non-empty array of [kernel, heads] pairs");
    std::vector<std::pair<int64_t, int64_t>> out;
    int64_t heads = 0;
    for (size_t g = 0; g < win.size(); ++g) {
        const auto& e = win[g];
        const std::string what = "CoaT trace: meta config 'crpe_window' entry " + std::to_string(g);
        if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || !e[1].is_number_integer())
            throw Error(what + " must be a pair of integers [kernel, heads], got " + e.dump());
        const int64_t k = e[0].get<int64_t>(), n = e[1].get<int64_t>();
        if (k < 1 || k % 2 == 0 || k > kMaxCrpeKernel)
            throw Error(what + ": kernel " + std::to_string(k) + " must be odd, 1.." + std::to_string(kMaxCrpeKernel));
        if (n < 1 || n > kMaxHeads) throw Error(what + ": head count " + std::to_string(n) + " must be positive");
        heads += n;
        out.emplace_back(k, n);
    }
    if (heads != numHeads)
        throw Error("CoaT trace: meta config 'crpe_window' assigns " + std::to_string(heads) + " heads, num_heads is " +
                    std::to_string(numHeads));
    return out;
}

struct TrainingFlagGuard {
    torch::nn::Module& m;
    bool was;
    explicit TrainingFlagGuard(torch::nn::Module& mod) : m(mod), was(mod.is_training()) {}
    ~TrainingFlagGuard() { m.train(was); }
};

torch::Tensor camFrom(const torch::Tensor& tokens, const torch::Tensor& grad, Grid g) {
    // tokens, grad: [1+h*w, C] of one image
    auto x = tokens.narrow(0, 1, g[0] * g[1]);
    auto alpha = grad.narrow(0, 1, g[0] * g[1]).mean(0);   // [C]
    auto cam = torch::relu(torch::matmul(x, alpha)).reshape({g[0], g[1]});
    const float mx = cam.max().item<float>();
    return mx > 0 ? cam / mx : torch::zeros_like(cam);
}

} // namespace

CoatTrace::CoatTrace(Trace trace) : trace_(std::move(trace)) {
    try {
        validate();
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("CoaT trace: malformed meta (") + e.what() + ")");
    }
}

CoatTrace CoatTrace::load(const std::string& path) {
    Trace t = Trace::load(path);
    try {
        return CoatTrace(std::move(t));
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
}

void CoatTrace::validate() const {
    if (trace_.family() != "coat") throw Error("not a CoaT trace (family '" + trace_.family() + "')");
    const auto& m = trace_.meta();
    for (const char* k : {"grids", "blocks", "num_heads", "head_dims", "top5", "config"})
        if (!m.contains(k)) throw Error(std::string("CoaT trace: meta has no '") + k + "'");
    if (!m["grids"].is_array() || m["grids"].size() != 4) throw Error("CoaT trace: meta 'grids' must list 4 grids");
    if (!m["blocks"].is_array() || m["blocks"].empty()) throw Error("CoaT trace: meta 'blocks' must be a non-empty array");
    if (!m["top5"].is_array()) throw Error("CoaT trace: meta 'top5' must be an array");
    for (int b = 0; b < numBlocks(); ++b) block(b);
    if (!m["num_heads"].is_number_integer() || m["num_heads"].get<int64_t>() < 1 ||
        m["num_heads"].get<int64_t>() > kMaxHeads)
        throw Error("CoaT trace: meta 'num_heads' must be an integer in 1.." + std::to_string(kMaxHeads));
    if (!m["head_dims"].is_array() || m["head_dims"].size() != 4) throw Error("CoaT trace: meta 'head_dims' must list 4 sizes");
    const int64_t H = numHeads();
    for (int s = 0; s < 4; ++s) {
        const Grid g = grid(s);
        // Each side is bounded before the product, which could otherwise overflow.
        if (g[0] < 1 || g[1] < 1 || g[0] > kMaxGridCells || g[1] > kMaxGridCells || g[0] * g[1] > kMaxGridCells)
            throw Error("CoaT trace: absurd grid size");
        const auto& c = m["head_dims"][size_t(s)];
        if (!c.is_number_integer() || c.get<int64_t>() < 1 || c.get<int64_t>() > kMaxHeadDim)
            throw Error("CoaT trace: meta 'head_dims' must hold integers in 1.." + std::to_string(kMaxHeadDim));
    }
    for (int b = 0; b < numBlocks(); ++b) {
        const auto info = block(b);
        const int64_t N = 1 + info.grid[0] * info.grid[1], C = headDim(info.scale);
        for (const char* t : {"q", "k_softmax", "v"}) trace_.get(key(b, t), {H, N, C});
    }
    trace_.get("input/image", {-1, -1, 3});
    trace_.get("output/probs", {-1});
    trace_.get("output/logits", {trace_.get("output/probs").size(0)});
    const Grid g4 = grid(3);
    trace_.get("cam/maps", {-1, g4[0], g4[1]});
    trace_.get("cam/classes", {trace_.get("cam/maps").size(0)});
    for (int s = 0; s < 3; ++s)
        if (hasCamScale(s)) {
            const Grid g = grid(s);
            trace_.get(camKey(s), {trace_.get("cam/maps").size(0), g[0], g[1]});
        }
    const auto& top = m["top5"];
    const int64_t classes = trace_.get("output/probs").size(0);
    for (size_t i = 0; i < top.size(); ++i) {
        const auto& j = top[i];
        if (!j.is_object() || !j.contains("class") || !j["class"].is_number_integer() ||
            j["class"].get<int64_t>() < 0 || j["class"].get<int64_t>() >= classes ||
            (j.contains("name") && !j["name"].is_string()) || (j.contains("prob") && !j["prob"].is_number()))
            throw Error("CoaT trace: meta top5 entry " + std::to_string(i) +
                        " must be {\"class\": 0.." + std::to_string(classes - 1) + ", \"name\": text, \"prob\": number}");
    }
    if (hasCrpe()) {
        const auto window = crpeGroups(m["config"], numHeads());
        for (int s = 0; s < 4; ++s)
            for (size_t g = 0; g < window.size(); ++g) {
                const std::string p = "crpe/scale_" + std::to_string(s + 1) + "/";
                const int64_t k = window[g].first, n = window[g].second;
                trace_.get(p + "weight_" + std::to_string(g), {n * headDim(s), 1, k, k});
                trace_.get(p + "bias_" + std::to_string(g), {n * headDim(s)});
            }
    }
}


int CoatTrace::numBlocks() const { return int(trace_.meta()["blocks"].size()); }

CoatBlockInfo CoatTrace::block(int b) const {
    if (b < 0 || b >= numBlocks())
        throw Error("CoaT trace: block " + std::to_string(b) + " out of range 0.." + std::to_string(numBlocks() - 1));
    const auto& j = trace_.meta()["blocks"][size_t(b)];
    if (!j.is_object() || !j.contains("name") || !j.contains("scale") || !j["scale"].is_number_integer())
        throw Error("CoaT trace: meta block " + std::to_string(b) + " is malformed");
    CoatBlockInfo info;
    info.name = j["name"].get<std::string>();
    info.scale = j["scale"].get<int>();
    if (info.scale < 0 || info.scale > 3) throw Error("CoaT trace: block scale out of range");
    info.grid = grid(info.scale);
    return info;
}

std::vector<int> CoatTrace::blocksOfScale(int scale) const {
    std::vector<int> out;
    for (int b = 0; b < numBlocks(); ++b)
        if (block(b).scale == scale) out.push_back(b);
    return out;
}

int CoatTrace::numHeads() const { return trace_.meta()["num_heads"].get<int>(); }
int64_t CoatTrace::headDim(int scale) const { return trace_.meta()["head_dims"][size_t(scale)].get<int64_t>(); }

Grid CoatTrace::grid(int scale) const {
    if (scale < 0 || scale > 3) throw Error("CoaT trace: scale must be 0..3, got " + std::to_string(scale));
    return pairOf(trace_.meta()["grids"][size_t(scale)], "grids");
}

torch::Tensor CoatTrace::image() const { return trace_.get("input/image"); }

bool CoatTrace::hasCrpe() const {
    const auto& c = trace_.meta()["config"];
    return c.is_object() && c.value("use_crpe", false);
}

void CoatTrace::checkBlock(int b, int head) const {
    block(b);
    if (head < -1 || head >= numHeads())
        throw Error("CoaT trace: head " + std::to_string(head) + " out of range (0.." + std::to_string(numHeads() - 1) +
                    ", or -1 for the mean)");
}

torch::Tensor CoatTrace::effectiveWeights(int b, int head, int64_t token) const {
    checkBlock(b, head);
    const auto info = block(b);
    const int64_t N = 1 + info.grid[0] * info.grid[1];
    if (token < 0 || token >= N)
        throw Error("CoaT trace: token " + std::to_string(token) + " out of range 0.." + std::to_string(N - 1));
    const auto& q = trace_.get(key(b, "q"));
    const auto& ks = trace_.get(key(b, "k_softmax"));
    const double scale = 1.0 / std::sqrt(double(q.size(2)));
    // [heads, N] = sum_c q[h, token, c] ks[h, j, c] / sqrt(C)
    auto w = torch::matmul(ks, q.select(1, token).unsqueeze(-1)).squeeze(-1) * scale;
    return head < 0 ? w.mean(0) : w[head].clone();
}

torch::Tensor CoatTrace::effectiveAttention(int b, int head, int64_t y, int64_t x, float* clsWeight) const {
    const auto info = block(b);
    if (y < 0 || x < 0 || y >= info.grid[0] || x >= info.grid[1])
        throw Error("CoaT trace: query pixel (" + std::to_string(y) + ", " + std::to_string(x) + ") is outside the " +
                    std::to_string(info.grid[0]) + "x" + std::to_string(info.grid[1]) + " grid of " + info.name);
    auto w = effectiveWeights(b, head, 1 + y * info.grid[1] + x);
    if (clsWeight) *clsWeight = w[0].item<float>();
    return w.narrow(0, 1, info.grid[0] * info.grid[1]).reshape({info.grid[0], info.grid[1]});
}

torch::Tensor CoatTrace::clsAttention(int b, int head) const {
    const auto info = block(b);
    return effectiveWeights(b, head, 0).narrow(0, 1, info.grid[0] * info.grid[1]).reshape({info.grid[0], info.grid[1]});
}

CrpeWindow CoatTrace::crpeWindow(int b, int head, int64_t y, int64_t x) const {
    checkBlock(b, head);
    if (head < 0) throw Error("CoaT trace: the CRPE window term needs one head (got -1)");
    if (!hasCrpe()) throw Error("CoaT trace: this model has no CRPE (use_crpe is false)");
    const auto info = block(b);
    const Grid g = info.grid;
    if (y < 0 || x < 0 || y >= g[0] || x >= g[1])
        throw Error("CoaT trace: query pixel (" + std::to_string(y) + ", " + std::to_string(x) + ") is outside the grid");
    const int64_t C = headDim(info.scale);
    const auto window = crpeGroups(trace_.meta()["config"], numHeads());   // validated: the head counts sum to num_heads > head
    int64_t first = 0;
    size_t group = 0;
    for (; group < window.size(); ++group) {
        const int64_t n = window[group].second;
        if (head < first + n) break;
        first += n;
    }
    const std::string p = "crpe/scale_" + std::to_string(info.scale + 1) + "/";
    const auto& W = trace_.get(p + "weight_" + std::to_string(group));
    const auto& bias = trace_.get(p + "bias_" + std::to_string(group));
    const int64_t k = W.size(2), r = k / 2, c0 = (head - first) * C;
    auto wh = W.narrow(0, c0, C).squeeze(1);                        // [C, k, k]
    auto qi = trace_.get(key(b, "q"))[head][1 + y * g[1] + x];      // [C]
    auto v = trace_.get(key(b, "v"))[head];                         // [N, C]
    CrpeWindow out;
    out.kernel = k;
    out.window = torch::zeros({k, k});
    for (int64_t dy = -r; dy <= r; ++dy)
        for (int64_t dx = -r; dx <= r; ++dx) {
            const int64_t yy = y + dy, xx = x + dx;
            if (yy < 0 || xx < 0 || yy >= g[0] || xx >= g[1]) continue;   // zero padding
            auto vj = v[1 + yy * g[1] + xx];
            out.window[dy + r][dx + r] = (qi * wh.select(1, dy + r).select(1, dx + r) * vj).sum();
        }
    out.bias = (qi * bias.narrow(0, c0, C)).sum().item<float>();
    return out;
}

torch::Tensor CoatTrace::keyDistribution(int b, int head, int64_t channel) const {
    checkBlock(b, head);
    const auto info = block(b);
    const auto& ks = trace_.get(key(b, "k_softmax"));
    if (channel < 0 || channel >= ks.size(2))
        throw Error("CoaT trace: channel " + std::to_string(channel) + " out of range 0.." + std::to_string(ks.size(2) - 1));
    auto col = head < 0 ? ks.select(2, channel).mean(0) : ks[head].select(1, channel);
    return col.narrow(0, 1, info.grid[0] * info.grid[1]).reshape({info.grid[0], info.grid[1]}).clone();
}

torch::Tensor CoatTrace::keyGallery(int b, int head) const {
    checkBlock(b, head);
    const auto info = block(b);
    const auto& ks = trace_.get(key(b, "k_softmax"));
    auto h = head < 0 ? ks.mean(0) : ks[head];   // [N, C]
    return h.narrow(0, 1, info.grid[0] * info.grid[1]).transpose(0, 1).reshape({ks.size(2), info.grid[0], info.grid[1]}).clone();
}

std::vector<CoatPrediction> CoatTrace::top5() const {
    std::vector<CoatPrediction> out;
    for (const auto& j : trace_.meta()["top5"]) {
        CoatPrediction p;
        p.classIndex = j.value("class", int64_t(0));
        p.name = j.value("name", std::string());
        p.prob = j.value("prob", 0.0f);
        out.push_back(p);
    }
    return out;
}

torch::Tensor CoatTrace::probs() const { return trace_.get("output/probs"); }

std::string CoatTrace::compute() const {
    const auto& meta = trace_.meta();
    return meta.contains("compute") && meta["compute"].is_string() ? meta["compute"].get<std::string>() : "float32";
}

torch::ScalarType CoatTrace::computeDtype() const {
    const std::string c = compute();
    return c == "bfloat16" ? torch::kBFloat16 : c == precisionName(torch::kQInt8) ? torch::kQInt8 : torch::kFloat;
}

bool CoatTrace::hasCamScale(int scale) const { return scale == 3 || (scale >= 0 && scale < 3 && trace_.has(camKey(scale))); }

torch::Tensor CoatTrace::cam(int k, int scale) const {
    if (!hasCamScale(scale))
        throw Error("CoaT trace: no class activation maps at scale " + std::to_string(scale + 1) +
                    " (a trace written before they were kept; run CoaT again)");
    const auto& maps = trace_.get(camKey(scale));
    if (k < 0 || k >= maps.size(0)) throw Error("CoaT trace: CAM index " + std::to_string(k) + " out of range");
    return maps[k].clone();
}

int64_t CoatTrace::camClass(int k) const {
    const auto& c = trace_.get("cam/classes");
    if (k < 0 || k >= c.size(0)) throw Error("CoaT trace: CAM index " + std::to_string(k) + " out of range");
    return c[k].item<int64_t>();
}

int CoatTrace::numCams() const { return int(trace_.get("cam/classes").size(0)); }

torch::Tensor CoatTrace::camForClass(int64_t classIndex, int scale) const {
    const auto& c = trace_.get("cam/classes");
    std::string have;
    for (int64_t i = 0; i < c.size(0); ++i) {
        if (c[i].item<int64_t>() == classIndex) return cam(int(i), scale);
        have += (have.empty() ? "" : ", ") + std::to_string(c[i].item<int64_t>());
    }
    throw Error("CoaT trace: no class activation map for class " + std::to_string(classIndex) + " (stored: " + have +
                "; glimpse infer --cam-class adds more)");
}

torch::Tensor gradCam(CoatModel& model, const torch::Tensor& image, int64_t classIndex, int scale,
                      torch::ScalarType compute) {
    if (classIndex < 0 || classIndex >= model.config().numClasses)
        throw Error("CoaT: class " + std::to_string(classIndex) + " out of range 0.." +
                    std::to_string(model.config().numClasses - 1));
    if (scale < 0 || scale > 3) throw Error("CoaT: Grad-CAM scale " + std::to_string(scale + 1) + " is not 1..4");
    TrainingFlagGuard guard(model);
    model.eval();
    torch::AutoGradMode grad(true);
    auto in = image.unsqueeze(0).to(model.device()).requires_grad_(true);
    CoatForwardOptions fo;
    fo.keepCamTokens = true;
    fo.productDtype = compute;
    auto out = model.forward(in, fo);
    const auto& tokens = out.scaleCamTokens[size_t(scale)];
    auto g = torch::autograd::grad({out.logits[0][classIndex]}, {tokens})[0];
    return camFrom(tokens[0].detach().cpu(), g[0].cpu(), out.grids[size_t(scale)]);
}

CoatTrace CoatTrace::capture(CoatModel& model, const CoatImage& image, const std::vector<int64_t>& camClasses,
                             torch::ScalarType compute) {
    const auto& cfg = model.config();
    for (int64_t c : camClasses)
        if (c < 0 || c >= cfg.numClasses)
            throw Error("CoaT: CAM class " + std::to_string(c) + " out of range 0.." + std::to_string(cfg.numClasses - 1));
    TrainingFlagGuard guard(model);
    model.eval();
    torch::AutoGradMode gradMode(true);   // for the CAMs; everything stored is detached
    auto in = image.tensor.unsqueeze(0).to(model.device()).requires_grad_(true);
    CoatForwardOptions fo;
    fo.record = true;
    fo.keepCamTokens = true;
    fo.productDtype = compute;   // CoatModel::forward refuses anything but float32, bfloat16 and int8
    auto out = model.forward(in, fo);

    CoatTrace ct;
    Trace& tr = ct.trace_;
    nlohmann::json meta;
    meta["model"] = "coat";
    meta["config"] = cfg.toJson();
    meta["config"].erase("class_names");   // names of the top-5 are in "top5"
    meta["original_size"] = {image.originalHeight, image.originalWidth};
    meta["input_size"] = {image.tensor.size(1), image.tensor.size(2)};
    meta["grids"] = nlohmann::json::array();
    meta["head_dims"] = nlohmann::json::array();
    for (int s = 0; s < 4; ++s) {
        meta["grids"].push_back({out.grids[size_t(s)][0], out.grids[size_t(s)][1]});
        meta["head_dims"].push_back(cfg.headDim(s));
    }
    meta["num_heads"] = cfg.numHeads;
    meta["co_scale"] = coScaleName(cfg.coScale);
    meta["compute"] = precisionName(compute);
    meta["blocks"] = nlohmann::json::array();
    for (size_t b = 0; b < out.attention.size(); ++b) {
        const auto& r = out.attention[b];
        meta["blocks"].push_back({{"name", r.name}, {"scale", r.scale}, {"grid", {r.grid[0], r.grid[1]}}});
        tr.set(ct.key(int(b), "q"), r.q[0].cpu().to(torch::kFloat));
        tr.set(ct.key(int(b), "k_softmax"), r.kSoftmax[0].cpu().to(torch::kFloat));
        tr.set(ct.key(int(b), "v"), r.v[0].cpu().to(torch::kFloat));
    }
    if (cfg.useCrpe)
        for (int s = 0; s < 4; ++s) {
            auto crpe = model.crpe(s);
            const std::string p = "crpe/scale_" + std::to_string(s + 1) + "/";
            for (size_t g = 0; g < crpe->convs.size(); ++g) {
                tr.set(p + "weight_" + std::to_string(g), crpe->convs[g]->weight.detach().cpu());
                tr.set(p + "bias_" + std::to_string(g), crpe->convs[g]->bias.detach().cpu());
            }
        }
    tr.set("input/image", torch::from_blob(image.crop.data, {image.crop.rows, image.crop.cols, 3}, torch::kUInt8).clone());
    auto logits = out.logits[0].detach().cpu();
    auto probs = torch::softmax(logits, 0);
    tr.set("output/logits", logits);
    tr.set("output/probs", probs);
    const int64_t k = std::min<int64_t>(kTopK, cfg.numClasses);
    auto top = probs.topk(k);
    auto topIdx = std::get<1>(top);
    meta["top5"] = nlohmann::json::array();
    std::vector<int64_t> camFor;
    for (int64_t i = 0; i < k; ++i) {
        const int64_t c = topIdx[i].item<int64_t>();
        meta["top5"].push_back({{"class", c}, {"name", cfg.className(c)}, {"prob", probs[c].item<float>()}});
        camFor.push_back(c);
    }
    for (int64_t c : camClasses)
        if (std::find(camFor.begin(), camFor.end(), c) == camFor.end()) camFor.push_back(c);
    std::array<std::vector<torch::Tensor>, 4> cams;   // per scale
    const std::vector<torch::Tensor> tokens(out.scaleCamTokens.begin(), out.scaleCamTokens.end());
    for (int64_t c : camFor) {
        const auto g = torch::autograd::grad({out.logits[0][c]}, tokens, {}, /*retain_graph=*/true);
        for (size_t s = 0; s < 4; ++s)
            cams[s].push_back(camFrom(tokens[s][0].detach().cpu(), g[s][0].cpu(), out.grids[s]));
    }
    for (int s = 0; s < 4; ++s) tr.set(ct.camKey(s), torch::stack(cams[size_t(s)], 0));
    tr.set("cam/classes", torch::tensor(camFor, torch::kLong));
    tr.meta() = meta;
    ct.validate();
    return ct;
}

CoatTrace runCoat(CoatModel& model, const cv::Mat& rgb, const std::vector<int64_t>& camClasses,
                  torch::ScalarType compute) {
    return CoatTrace::capture(model, model.preprocess(rgb), camClasses, compute);
}

} // namespace glimpse::coat
