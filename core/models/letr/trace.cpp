#include "core/models/letr/trace.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/models/letr/flips.h"

namespace glimpse::letr {

namespace {

const Stage kStages[2] = {Stage::Coarse, Stage::Fine};

std::array<int64_t, 2> pair(const nlohmann::json& j, const char* what) {
    if (!j.is_array() || j.size() != 2 || !j[0].is_number_integer() || !j[1].is_number_integer())
        throw Error(std::string("LETR trace: meta '") + what + "' must be [int, int]");
    return {j[0].get<int64_t>(), j[1].get<int64_t>()};
}

// Restores a module's training flag when leaving scope.
struct TrainingFlagGuard {
    torch::nn::Module& m;
    bool was;
    explicit TrainingFlagGuard(torch::nn::Module& mod) : m(mod), was(mod.is_training()) {}
    ~TrainingFlagGuard() { m.train(was); }
};

} // namespace

std::string LetrTrace::layerKey(Stage s, int layer, const std::string& what) const {
    return std::string(stageName(s)) + "/layer_" + std::to_string(layer) + "/" + what;
}

LetrTrace::LetrTrace(Trace trace) : trace_(std::move(trace)) { validate(); }

LetrTrace LetrTrace::load(const std::string& path) {
    Trace t = Trace::load(path);
    try {
        return LetrTrace(std::move(t));
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
}

LetrTrace LetrTrace::capture(const LetrModel& model, const LetrOutput& out, int64_t index,
                             const LetrImage& image, LetrTracePrecision precision) {
    const auto& cfg = model.config();
    const int64_t B = int64_t(out.inputSizes.size());
    if (index < 0 || index >= B)
        throw Error("LETR trace: image index " + std::to_string(index) + " out of range 0.." +
                    std::to_string(B - 1));
    if (out.stages.empty() || out.stages[0].crossIn.empty())
        throw Error("LETR trace: the forward pass was run without LetrForwardOptions::record");
    if (out.inputSizes[size_t(index)][0] != image.height() || out.inputSizes[size_t(index)][1] != image.width())
        throw Error("LETR trace: the image does not match the forward pass's input " +
                    std::to_string(index));
    const int64_t d = cfg.hiddenDim, N = cfg.numQueries;
    const bool half = precision == LetrTracePrecision::Float16;

    LetrTrace lt;
    Trace& tr = lt.trace_;
    auto storeState = [&](const std::string& name, const torch::Tensor& x) {
        tr.set(name, x.detach().to(torch::kCPU).to(half ? torch::kHalf : torch::kFloat).contiguous());
    };
    auto storeFloat = [&](const std::string& name, const torch::Tensor& x) {
        tr.set(name, x.detach().to(torch::kCPU).to(torch::kFloat).contiguous());
    };

    nlohmann::json meta;
    meta["model"] = "letr";
    meta["config"] = cfg.toJson();
    meta["original_size"] = {image.originalHeight, image.originalWidth};
    meta["input_size"] = {image.height(), image.width()};
    meta["num_queries"] = N;
    meta["hidden_dim"] = d;
    meta["nheads"] = cfg.nheads;
    meta["precision"] = half ? "float16" : "float32";
    meta["stages"] = nlohmann::json::array();
    meta["decoder_layers"] = nlohmann::json::array();
    meta["feature_size"] = nlohmann::json::object();
    meta["levels"] = nlohmann::json::object();

    auto rgb = torch::from_blob(image.resized.data, {image.height(), image.width(), 3}, torch::kUInt8);
    tr.set("input/image", rgb.clone());

    const double W0 = double(image.originalWidth), H0 = double(image.originalHeight);
    auto scale = torch::tensor({W0, H0, W0, H0}, torch::kFloat);
    for (size_t si = 0; si < out.stages.size(); ++si) {
        const Stage stage = kStages[si];
        const std::string sn = stageName(stage);
        const LetrStageOutput& so = out.stages[si];
        const int64_t h = so.validSizes[size_t(index)][0], w = so.validSizes[size_t(index)][1];
        auto crop = [&](const torch::Tensor& x) {   // [B, Hp*Wp, d] -> [h*w, d]
            return x[index].view({so.height, so.width, d}).narrow(0, 0, h).narrow(1, 0, w).reshape({h * w, d});
        };
        meta["stages"].push_back(sn);
        const int L = model.numDecoderLayers(stage);
        meta["decoder_layers"].push_back(L);
        meta["feature_size"][sn] = {h, w};
        meta["levels"][sn] = so.level;
        tr.set(sn + "/mask", so.mask[index].narrow(0, 0, h).narrow(1, 0, w).to(torch::kCPU).to(torch::kUInt8));
        storeState(sn + "/memory", crop(so.memory));
        storeState(sn + "/pos", crop(so.pos));
        storeState(sn + "/query_pos", so.queryPos[index]);
        for (int l = 0; l < L; ++l) {
            if (l > 0) storeState(lt.layerKey(stage, l, "self_in"), so.selfIn[size_t(l)][index]);
            storeState(lt.layerKey(stage, l, "cross_in"), so.crossIn[size_t(l)][index]);
            auto layer = model.decoderLayer(stage, l);
            storeFloat(lt.layerKey(stage, l, "self_attn/in_proj_weight_qk"),
                       layer->self_attn->in_proj_weight.narrow(0, 0, 2 * d));
            storeFloat(lt.layerKey(stage, l, "self_attn/in_proj_bias_qk"),
                       layer->self_attn->in_proj_bias.narrow(0, 0, 2 * d));
            storeFloat(lt.layerKey(stage, l, "cross_attn/in_proj_weight_qk"),
                       layer->multihead_attn->in_proj_weight.narrow(0, 0, 2 * d));
            storeFloat(lt.layerKey(stage, l, "cross_attn/in_proj_bias_qk"),
                       layer->multihead_attn->in_proj_bias.narrow(0, 0, 2 * d));
            storeFloat(lt.layerKey(stage, l, "endpoints"),
                       so.lines[l][index].to(torch::kCPU).to(torch::kFloat) * scale);
            storeFloat(lt.layerKey(stage, l, "scores"), torch::softmax(so.logits[l][index], -1).select(-1, 0));
        }
    }
    tr.meta() = meta;
    lt.validate();
    return lt;
}

void LetrTrace::validate() const {
    if (trace_.family() != "letr")
        throw Error("not a LETR trace (family '" + trace_.family() + "')");
    const auto& m = trace_.meta();
    for (const char* key : {"original_size", "input_size", "num_queries", "hidden_dim", "nheads",
                            "stages", "decoder_layers", "feature_size", "precision"})
        if (!m.contains(key)) throw Error(std::string("LETR trace: meta has no '") + key + "'");
    const int64_t N = numQueries(), d = hiddenDim();
    const int H = numHeads();
    if (N < 1 || d < 1 || H < 1 || d % H != 0)
        throw Error("LETR trace: inconsistent num_queries/hidden_dim/nheads in meta");
    const int S = numStages();
    if (!m["decoder_layers"].is_array() || int(m["decoder_layers"].size()) != S)
        throw Error("LETR trace: meta 'decoder_layers' does not match 'stages'");
    if (m.contains("flips")) {
        const auto& f = m["flips"];
        if (!f.is_number_integer() || (f.get<int64_t>() != 1 && f.get<int64_t>() != 2 && f.get<int64_t>() != 4))
            throw Error("LETR trace: meta 'flips' must be 1, 2 or 4");
    }
    const auto in = inputSize();
    trace_.get("input/image", {in[0], in[1], 3});
    for (int si = 0; si < S; ++si) {
        const Stage s = kStages[si];
        const std::string sn = stageName(s);
        const auto fs = featureSize(s);
        trace_.get(sn + "/mask", {fs[0], fs[1]});
        trace_.get(sn + "/memory", {fs[0] * fs[1], d});
        trace_.get(sn + "/pos", {fs[0] * fs[1], d});
        trace_.get(sn + "/query_pos", {N, d});
        for (int l = 0; l < numLayers(s); ++l) {
            if (l > 0) trace_.get(layerKey(s, l, "self_in"), {N, d});
            trace_.get(layerKey(s, l, "cross_in"), {N, d});
            for (const char* a : {"self_attn", "cross_attn"}) {
                trace_.get(layerKey(s, l, std::string(a) + "/in_proj_weight_qk"), {2 * d, d});
                trace_.get(layerKey(s, l, std::string(a) + "/in_proj_bias_qk"), {2 * d});
            }
            trace_.get(layerKey(s, l, "endpoints"), {N, 4});
            trace_.get(layerKey(s, l, "scores"), {N});
        }
    }
}

int LetrTrace::numStages() const {
    const auto& st = trace_.meta().at("stages");
    if (!st.is_array() || st.empty() || st.size() > 2 || st[0] != "coarse" || (st.size() == 2 && st[1] != "fine"))
        throw Error("LETR trace: meta 'stages' must be [\"coarse\"] or [\"coarse\", \"fine\"]");
    return int(st.size());
}

int LetrTrace::numLayers(Stage s) const {
    const int si = int(s);
    if (si >= numStages())
        throw Error("LETR trace: this trace has no " + std::string(stageName(s)) + " stage");
    const auto& v = trace_.meta().at("decoder_layers")[size_t(si)];
    if (!v.is_number_integer() || v.get<int>() < 1) throw Error("LETR trace: bad meta 'decoder_layers'");
    return v.get<int>();
}

int LetrTrace::numHeads() const { return trace_.meta().at("nheads").get<int>(); }
int64_t LetrTrace::numQueries() const { return trace_.meta().at("num_queries").get<int64_t>(); }
int64_t LetrTrace::hiddenDim() const { return trace_.meta().at("hidden_dim").get<int64_t>(); }

std::array<int64_t, 2> LetrTrace::featureSize(Stage s) const {
    numLayers(s);   // checks the stage exists
    const auto& fs = trace_.meta().at("feature_size");
    if (!fs.contains(stageName(s))) throw Error("LETR trace: meta 'feature_size' lacks a stage");
    return pair(fs.at(stageName(s)), "feature_size");
}
std::array<int64_t, 2> LetrTrace::originalSize() const { return pair(trace_.meta().at("original_size"), "original_size"); }
std::array<int64_t, 2> LetrTrace::inputSize() const { return pair(trace_.meta().at("input_size"), "input_size"); }

LetrTracePrecision LetrTrace::precision() const {
    return trace_.meta().at("precision") == "float16" ? LetrTracePrecision::Float16 : LetrTracePrecision::Float32;
}

int LetrTrace::flips() const {
    const auto& m = trace_.meta();
    return m.contains("flips") ? int(m["flips"].get<int64_t>()) : 1;
}

torch::Tensor LetrTrace::image() const { return trace_.get("input/image"); }

torch::Tensor LetrTrace::endpoints(Stage s, int layer) const {
    checkArgs(s, layer, -1, 0);
    return trace_.get(layerKey(s, layer, "endpoints"));
}

torch::Tensor LetrTrace::scores(Stage s, int layer) const {
    checkArgs(s, layer, -1, 0);
    return trace_.get(layerKey(s, layer, "scores"));
}

std::vector<LetrLine> LetrTrace::lines(Stage s, int layer, float threshold) const {
    auto e = endpoints(s, layer).contiguous();
    auto sc = scores(s, layer).contiguous();
    auto keep = torch::nonzero(sc >= threshold).flatten();
    auto order = torch::argsort(sc.index_select(0, keep), 0, /*descending=*/true);
    keep = keep.index_select(0, order);
    std::vector<LetrLine> out;
    auto ea = e.accessor<float, 2>();
    auto sa = sc.accessor<float, 1>();
    auto ka = keep.accessor<int64_t, 1>();
    for (int64_t i = 0; i < keep.size(0); ++i) {
        const int64_t k = ka[i];
        out.push_back({ea[k][0], ea[k][1], ea[k][2], ea[k][3], sa[k], k});
    }
    return out;
}

void LetrTrace::checkArgs(Stage s, int layer, int head, int64_t entity) const {
    const int L = numLayers(s);
    if (layer < 0 || layer >= L)
        throw Error("LETR trace: " + std::string(stageName(s)) + " layer " + std::to_string(layer) +
                    " out of range 0.." + std::to_string(L - 1));
    if (head < -1 || head >= numHeads())
        throw Error("LETR trace: head " + std::to_string(head) + " out of range -1.." +
                    std::to_string(numHeads() - 1));
    if (entity < 0 || entity >= numQueries())
        throw Error("LETR trace: entity " + std::to_string(entity) + " out of range 0.." +
                    std::to_string(numQueries() - 1));
}

torch::Tensor LetrTrace::state(const std::string& name) const { return trace_.get(name).to(torch::kFloat); }

torch::Tensor LetrTrace::attend(const torch::Tensor& queryIn, const torch::Tensor& keysIn,
                                const torch::Tensor& wqk, const torch::Tensor& bqk, int head,
                                const torch::Tensor& keyMask) const {
    return attendHeads(queryIn, keysIn, wqk, bqk, head, keyMask).mean(1);
}

torch::Tensor LetrTrace::attendHeads(const torch::Tensor& queryIn, const torch::Tensor& keysIn,
                                     const torch::Tensor& wqk, const torch::Tensor& bqk, int head,
                                     const torch::Tensor& keyMask) const {
    const int64_t d = hiddenDim(), H = numHeads(), dh = d / H;
    auto q = (torch::mv(wqk.narrow(0, 0, d), queryIn) + bqk.narrow(0, 0, d)) * (1.0 / std::sqrt(double(dh)));
    auto qh = q.view({H, dh});
    auto wk = wqk.narrow(0, d, d).view({H, dh, d});
    auto bk = bqk.narrow(0, d, d).view({H, dh});
    if (head >= 0) {
        qh = qh.narrow(0, head, 1);
        wk = wk.narrow(0, head, 1);
        bk = bk.narrow(0, head, 1);
    }
    // q_h . (W_k,h x + b_k,h) = (W_k,h^T q_h) . x + q_h . b_k,h: one [S, d] x [d, heads] product.
    auto u = torch::bmm(qh.unsqueeze(1), wk).squeeze(1);    // [h', d]
    auto c = (qh * bk).sum(1);                               // [h']
    auto logits = torch::addmm(c.unsqueeze(0), keysIn, u.t());   // [S, h']
    if (keyMask.defined())
        logits = logits.masked_fill(keyMask.unsqueeze(1), -std::numeric_limits<float>::infinity());
    return torch::softmax(logits, 0);
}

torch::Tensor LetrTrace::stageKeys(Stage s) const {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    torch::Tensor& k = cache_->keys[int(s)];
    if (!k.defined()) {
        const std::string sn = stageName(s);
        k = state(sn + "/memory") + state(sn + "/pos");
    }
    return k;
}

torch::Tensor LetrTrace::crossAttendHeads(Stage s, int layer, int head, int64_t entity) const {
    const std::string sn = stageName(s);
    auto qin = trace_.get(layerKey(s, layer, "cross_in"))[entity].to(torch::kFloat) +
               trace_.get(sn + "/query_pos")[entity].to(torch::kFloat);
    auto mask = trace_.get(sn + "/mask").flatten().to(torch::kBool);
    return attendHeads(qin, stageKeys(s), trace_.get(layerKey(s, layer, "cross_attn/in_proj_weight_qk")),
                       trace_.get(layerKey(s, layer, "cross_attn/in_proj_bias_qk")), head, mask);
}

torch::Tensor LetrTrace::attention(Stage s, int layer, int head, int64_t entity) const {
    torch::NoGradGuard noGrad;
    checkArgs(s, layer, head, entity);
    const auto fs = featureSize(s);
    return crossAttendHeads(s, layer, head, entity).mean(1).view({fs[0], fs[1]});
}

torch::Tensor LetrTrace::attentionHeads(Stage s, int layer, int64_t entity) const {
    torch::NoGradGuard noGrad;
    checkArgs(s, layer, -1, entity);
    const auto fs = featureSize(s);
    return crossAttendHeads(s, layer, -1, entity).t().contiguous().view({numHeads(), fs[0], fs[1]});
}

torch::Tensor LetrTrace::selfAttention(Stage s, int layer, int head, int64_t entity) const {
    torch::NoGradGuard noGrad;
    checkArgs(s, layer, head, entity);
    const std::string sn = stageName(s);
    auto keys = state(sn + "/query_pos");
    if (layer > 0) keys = keys + state(layerKey(s, layer, "self_in"));
    return attend(keys[entity], keys, trace_.get(layerKey(s, layer, "self_attn/in_proj_weight_qk")),
                  trace_.get(layerKey(s, layer, "self_attn/in_proj_bias_qk")), head, torch::Tensor());
}

std::vector<LetrTrace> runLetr(LetrModel& model, const std::vector<cv::Mat>& images,
                               const LetrRunOptions& options) {
    checkFlipViews(options.flips);
    std::vector<LetrImage> inputs;
    for (const auto& im : images) inputs.push_back(model.preprocess(im, options.shortSide, options.maxLongSide));
    LetrForwardOptions fo;
    fo.record = true;
    fo.time = options.timings != nullptr;
    fo.backboneChannelsLast = options.foldedBackbone || options.compute == torch::kBFloat16;
    if (options.compute == torch::kBFloat16) {
        fo.backboneDtype = torch::kBFloat16;
        fo.transformerDtype = torch::kBFloat16;
    }
    // Absent from the trace's meta for the reference path (traces as before).
    const std::string computeName = options.compute == torch::kBFloat16 ? "bfloat16" : "float32 (folded backbone)";
    // One recorded pass in eval mode without grad; the timings are the last pass's.
    auto pass = [&](const auto& forward) {
        LetrOutput out;
        {
            TrainingFlagGuard guard(model);
            model.eval();
            torch::NoGradGuard noGrad;
            out = forward();
        }
        if (options.timings) *options.timings = out.timings;
        return out;
    };
    std::vector<LetrTrace> traces;
    if (options.flips > 1) {
        // One batch of views per image: the ensemble merges within an image.
        for (const LetrImage& in : inputs) {
            const LetrOutput out = pass([&] { return forwardFlipEnsemble(model, in.tensor, options.flips, fo); });
            traces.push_back(LetrTrace::capture(model, out, 0, in, options.precision));
            traces.back().raw().meta()["flips"] = options.flips;
            if (fo.backboneChannelsLast) traces.back().raw().meta()["compute"] = computeName;
        }
        return traces;
    }
    std::vector<torch::Tensor> tensors;
    for (const LetrImage& in : inputs) tensors.push_back(in.tensor);
    const LetrOutput out = pass([&] { return model.forward(tensors, fo); });
    for (size_t i = 0; i < inputs.size(); ++i) {
        traces.push_back(LetrTrace::capture(model, out, int64_t(i), inputs[i], options.precision));
        if (fo.backboneChannelsLast) traces.back().raw().meta()["compute"] = computeName;
    }
    return traces;
}

LetrTrace runLetr(LetrModel& model, const cv::Mat& image, const LetrRunOptions& options) {
    return runLetr(model, std::vector<cv::Mat>{image}, options).front();
}

} // namespace glimpse::letr
