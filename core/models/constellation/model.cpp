#include "core/models/constellation/model.h"

#include <cmath>
#include <regex>

#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/io/checkpoint.h"

namespace glimpse::constellation {

namespace F = torch::nn::functional;

namespace {

const char* kFamily = "constellation";

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// DropBlock (Ghiasi et al.): zero square blocks of `size` cells, rescale the rest. Training only.
torch::Tensor dropBlock(const torch::Tensor& x, double prob, int64_t size) {
    const int64_t h = x.size(2), w = x.size(3);
    const int64_t bs = std::min({size, h, w});
    if (prob <= 0 || bs < 1) return x;
    const double gamma = prob / double(bs * bs) * double(h * w) / double((h - bs + 1) * (w - bs + 1));
    auto seeds = torch::bernoulli(torch::full({x.size(0), x.size(1), h - bs + 1, w - bs + 1}, gamma, x.options()));
    seeds = F::pad(seeds, F::PadFuncOptions({bs - 1, bs - 1, bs - 1, bs - 1}));
    auto blocks = F::max_pool2d(seeds, F::MaxPool2dFuncOptions(bs).stride(1));
    auto keep = 1 - blocks.narrow(2, 0, h).narrow(3, 0, w);
    return x * keep * (double(keep.numel()) / keep.sum().clamp_min(1.0));
}

// A ResNet-12 block (the official Block): three merge blocks (conv + optional constellation
// module + merge) each followed by its BN (bn1..bn3), LeakyReLU 0.1 between, a 1x1-conv
// shortcut, LeakyReLU, max-pool 2. Registration order = the official one (and the order the
// seeded initialization walks).
class ResBlockImpl : public torch::nn::Module {
public:
    ResBlockImpl(int64_t in, int64_t out, const std::vector<bool>& cluster, const std::vector<bool>& relation,
                 const ConstellationConfig& cfg) {
        mergeblock1 = register_module("mergeblock1", ConvUnit(in, out, cluster[0], relation[0], cfg, false));
        bn1 = register_module("bn1", torch::nn::BatchNorm2d(out));
        mergeblock2 = register_module("mergeblock2", ConvUnit(out, out, cluster[1], relation[1], cfg, false));
        bn2 = register_module("bn2", torch::nn::BatchNorm2d(out));
        mergeblock3 = register_module("mergeblock3", ConvUnit(out, out, cluster[2], relation[2], cfg, false));
        bn3 = register_module("bn3", torch::nn::BatchNorm2d(out));
        downsample = register_module(
            "downsample", torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).bias(false)),
                                                torch::nn::BatchNorm2d(out)));
    }
    ConvUnit mergeblock1{nullptr}, mergeblock2{nullptr}, mergeblock3{nullptr};
    torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
    torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(ResBlock);

torch::Tensor leaky(const torch::Tensor& x) { return F::leaky_relu(x, F::LeakyReLUFuncOptions().negative_slope(0.1)); }

} // namespace

// ---- clustering ---------------------------------------------------------------------------

CellClusteringImpl::CellClusteringImpl(int64_t channels, int64_t clusters, double beta_, double lambda_)
    : beta(beta_), lambda(lambda_) {
    V_buffer = register_buffer("V_buffer", F::normalize(torch::randn({clusters, channels}),
                                                        F::NormalizeFuncOptions().dim(-1)));
    V_count_buffer = register_buffer("V_count_buffer", torch::ones({clusters}, torch::kFloat64));
}

torch::Tensor CellClusteringImpl::centers() const {
    return F::normalize(V_buffer, F::NormalizeFuncOptions().dim(-1));
}

torch::Tensor CellClusteringImpl::forward(const torch::Tensor& x) {
    const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    auto sim = forwardCells(x.permute({0, 2, 3, 1}).reshape({B * H * W, C}));
    return sim.view({B, H, W, -1}).permute({0, 3, 1, 2}).contiguous();
}

torch::Tensor CellClusteringImpl::forwardCells(const torch::Tensor& cells) {
    // cos(x_i, v_k) = (x_i . v_k) / |x_i| for unit centers v_k: the cells are never normalized
    // into a copy (whose division and its backward cost more than the product itself); 1 / |x_i|
    // scales the [N, K] product instead (F::normalize's eps 1e-12 kept).
    auto rnorm = cells.norm(2, {1}, true).clamp_min(1e-12).reciprocal();   // [N, 1]
    auto sim = cells.mm(centers().detach().t()).mul(rnorm);                 // [N, K]
    // The step reuses this similarity (computed before the centers move, as in the reference).
    if (is_training()) updateFromSimilarity(cells.detach(), sim.detach(), rnorm.detach());
    return sim;
}

void CellClusteringImpl::updateCenters(const torch::Tensor& u) {
    torch::NoGradGuard noGrad;
    updateFromSimilarity(u, u.mm(centers().t()), {});
}

void CellClusteringImpl::updateFromSimilarity(const torch::Tensor& x, const torch::Tensor& sim, const torch::Tensor& rnorm) {
    torch::NoGradGuard noGrad;
    auto m = torch::softmax(sim * beta, -1);                  // [N, K] (sim itself is left as is)
    auto delta = m.sum(0);                                    // [K]
    // sum_i m_ik u_i = sum_i (m_ik / |x_i|) x_i: the scale goes on m (in place), not on a copy of x.
    if (rnorm.defined()) m.mul_(rnorm);
    // v'_k (a cluster no cell reached, delta_k = 0, keeps its center: eta_k = 0 and v'_k = 0).
    auto batchCenters = m.t().mm(x).div_(delta.clamp_min(1e-12).unsqueeze(1));
    auto count = V_count_buffer + delta.to(torch::kFloat64);
    auto eta = (lambda * delta.to(torch::kFloat64) / count).to(torch::kFloat).unsqueeze(1);
    // V = (1 - eta) V + eta v' = V + eta (v' - V), in place.
    V_buffer.add_(batchCenters.sub_(V_buffer).mul_(eta));
    V_count_buffer.copy_(count);
}

// ---- relation -----------------------------------------------------------------------------

torch::Tensor sinePositionEncoding(int64_t h, int64_t w, int64_t numPosFeats) {
    auto dimT = torch::arange(numPosFeats, torch::kFloat);
    dimT = torch::pow(10000.0, 2 * torch::floor_divide(dimT, 2) / double(numPosFeats));
    auto encode = [&](int64_t n) {   // [n, numPosFeats]: interleaved sin (even), cos (odd)
        auto pos = torch::arange(1, n + 1, torch::kFloat).unsqueeze(1) / dimT;
        auto s = pos.index({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)}).sin();
        auto c = pos.index({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)}).cos();
        return torch::stack({s, c}, 2).flatten(1);
    };
    auto py = encode(h).unsqueeze(1).expand({h, w, numPosFeats});
    auto px = encode(w).unsqueeze(0).expand({h, w, numPosFeats});
    return torch::cat({py, px}, 2).contiguous();
}

MultiHeadAttentionImpl::MultiHeadAttentionImpl(int64_t dim, int64_t heads_, double p) : heads(heads_) {
    linear_v = register_module("linear_v", torch::nn::Linear(dim, dim));
    linear_k = register_module("linear_k", torch::nn::Linear(dim, dim));
    linear_q = register_module("linear_q", torch::nn::Linear(dim, dim));
    linear_merge = register_module("linear_merge", torch::nn::Linear(dim, dim));
    dropout = register_module("dropout", torch::nn::Dropout(p));
}

torch::Tensor MultiHeadAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                              torch::Tensor* weights) {
    const int64_t B = q.size(0), N = q.size(1), D = q.size(2), hd = D / heads;
    auto split = [&](const torch::Tensor& t) { return t.view({B, -1, heads, hd}).transpose(1, 2); };
    auto vv = split(linear_v(v)), kk = split(linear_k(k)), qq = split(linear_q(q));
    auto att = torch::softmax(qq.matmul(kk.transpose(-2, -1)) / std::sqrt(double(hd)), -1);
    if (weights) *weights = att.detach();
    auto out = dropout(att).matmul(vv).transpose(1, 2).contiguous().view({B, N, D});
    return linear_merge(out);
}

CellRelationImpl::CellRelationImpl(int64_t dim_, int64_t heads, double p) : dim(dim_) {
    mhatt = register_module("mhatt", MultiHeadAttention(dim, heads, p));
    dropout = register_module("dropout", torch::nn::Dropout(p));
    dropout1 = register_module("dropout1", torch::nn::Dropout(p));
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    dropout2 = register_module("dropout2", torch::nn::Dropout(p));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    linear1 = register_module("linear1", torch::nn::Linear(dim, dim));
    linear2 = register_module("linear2", torch::nn::Linear(dim, dim));
}

torch::Tensor CellRelationImpl::forward(const torch::Tensor& s, torch::Tensor* weights) {
    const int64_t B = s.size(0), K = s.size(1), H = s.size(2), W = s.size(3);
    auto y = forwardCells(s.permute({0, 2, 3, 1}).reshape({B, H * W, K}), H, W, weights);
    return y.view({B, H, W, K}).permute({0, 3, 1, 2}).contiguous();
}

torch::Tensor CellRelationImpl::forwardCells(const torch::Tensor& v, int64_t H, int64_t W, torch::Tensor* weights) {
    const int64_t K = v.size(2);
    auto pos = sinePositionEncoding(H, W, K / 2).to(v.device()).view({1, H * W, K});
    auto qk = v + pos;
    auto y = norm1(v + dropout1(mhatt(qk, qk, v, weights)));
    return norm2(y + dropout2(linear2(dropout(torch::relu(linear1(y))))));
}

// ---- conv unit ----------------------------------------------------------------------------

ConvUnitImpl::ConvUnitImpl(int64_t in, int64_t out, bool cluster, bool relation_, const ConstellationConfig& cfg,
                           bool withBn) {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1).bias(false)));
    if (cluster) {
        feat_cluster = register_module("feat_cluster", CellClustering(out, cfg.clusters, cfg.beta, cfg.lambda));
        if (relation_) {
            transformer = std::make_shared<torch::nn::Module>();
            relation = CellRelation(cfg.clusters, cfg.heads, cfg.dropout);
            transformer->register_module("layers", torch::nn::ModuleList(relation));
            register_module("transformer", transformer);
        }
        merge = register_module("merge",
                                torch::nn::Conv2d(torch::nn::Conv2dOptions(out + cfg.clusters, out, 1).bias(false)));
    }
    if (withBn) bn = register_module("bn", torch::nn::BatchNorm2d(out));
}

torch::Tensor ConvUnitImpl::forward(const torch::Tensor& x, std::vector<CellRecord>* records, const std::string& name,
                                    int64_t layer, int branch) {
    auto y = conv(x);
    if (feat_cluster) {
        // Everything in cells-by-channels layout [B*H*W, C] (a view when y is channels-last, one
        // copy otherwise): the similarity, the relation and the 1x1 merge as matrix products,
        // merge(cat(y, side)) = y W_y^T + side W_s^T, without the concatenated copy.
        const int64_t B = y.size(0), C = y.size(1), H = y.size(2), W = y.size(3), N = B * H * W;
        auto cells = y.permute({0, 2, 3, 1}).reshape({N, C});
        auto sim = feat_cluster->forwardCells(cells);   // [N, K]
        const int64_t K = sim.size(1);
        torch::Tensor att, side = sim;
        if (relation) side = relation->forwardCells(sim.view({B, H * W, K}), H, W, records ? &att : nullptr).reshape({N, K});
        if (records)
            records->push_back({name, layer, branch, sim.detach().view({B, H, W, K}).permute({0, 3, 1, 2}).contiguous(), att});
        auto w = merge->weight.view({C, C + K});
        auto merged = torch::addmm(side.mm(w.narrow(1, C, K).t()), cells, w.narrow(1, 0, C).t());   // [N, C]
        y = merged.view({B, H, W, C}).permute({0, 3, 1, 2});   // channels-last memory
    }
    return bn ? bn(y) : y;
}

// ---- model --------------------------------------------------------------------------------

ConstellationModel::ConstellationModel(const ConstellationConfig& config, uint64_t seed) : config_(config) {
    config_.validate();
    encoder_ = std::make_shared<torch::nn::Module>();
    const int64_t split = config_.splitBlock();
    if (split > 0) stem_ = encoder_->register_module("stem", makeStage(0, split - 1, config_.constellation));
    branch1_ = encoder_->register_module("branch1", makeStage(split, config_.numBlocks() - 1, config_.constellation));
    if (config_.multiBranch)
        branch2_ = encoder_->register_module("branch2", makeStage(split, config_.numBlocks() - 1, false));
    register_module("encoder", encoder_);
    auto head = std::make_shared<torch::nn::Module>();
    classifier = head->register_module("linear", torch::nn::Linear(config_.blockChannels().back(), config_.numClasses));
    register_module("classifier", head);
    temp = register_parameter("temp", torch::full({}, 10.0));
    resetParameters(seed);
}

torch::nn::ModuleList ConstellationModel::makeStage(int64_t first, int64_t last, bool constellation) {
    auto ch = config_.blockChannels();
    auto cl = config_.resolvedClusterLayers(), rl = config_.resolvedRelationLayers();
    torch::nn::ModuleList list;
    const int64_t per = config_.convsPerBlock();
    const std::string stage = first == 0 && config_.multiBranch ? "stem" : "branch";
    for (int64_t b = first; b <= last; ++b) {
        const int64_t in = b == 0 ? 3 : ch[size_t(b - 1)], out = ch[size_t(b)];
        std::vector<bool> cluster, relation;
        for (int64_t j = 0; j < per; ++j) {
            const int64_t layer = b * per + j + 1;
            cluster.push_back(constellation && contains(cl, layer));
            relation.push_back(constellation && contains(rl, layer));
        }
        if (config_.backbone == "resnet12") list->push_back(ResBlock(in, out, cluster, relation, config_));
        else list->push_back(ConvUnit(in, out, cluster[0], relation[0], config_));
    }
    return list;
}

void ConstellationModel::resetParameters(uint64_t seed) {
    torch::NoGradGuard noGrad;
    at::Generator gen = at::detail::createCPUGenerator(seed);
    for (auto& item : named_parameters(true)) {
        auto& p = item.value();
        const std::string& name = item.key();
        auto v = torch::empty(p.sizes(), torch::kFloat);
        if (name == "temp") v.fill_(10.0);
        else if (p.dim() == 4) v.normal_(0.0, std::sqrt(2.0 / double(p.size(0) * p.size(2) * p.size(3))), gen);
        else if (p.dim() == 2) v.uniform_(-1.0 / std::sqrt(double(p.size(1))), 1.0 / std::sqrt(double(p.size(1))), gen);
        else if (name.find(".bn") != std::string::npos || name.find("norm") != std::string::npos ||
                 name.find("downsample.1") != std::string::npos)
            v.fill_(name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 ? 1.0 : 0.0);
        else {   // linear biases: U(+-1/sqrt(fan_in)) of their weight
            // Keep the dict alive: find() points into it (a temporary dict here left w dangling).
            const auto params = named_parameters(true);
            const auto* w = params.find(name.substr(0, name.size() - 4) + "weight");
            const double bound = w ? 1.0 / std::sqrt(double(w->size(1))) : 0.0;
            v.uniform_(-bound, bound, gen);
        }
        p.copy_(v);
    }
    for (auto& item : named_buffers(true)) {
        const std::string& name = item.key();
        auto& b = item.value();
        if (name.size() >= 8 && name.compare(name.size() - 8, 8, "V_buffer") == 0)
            b.copy_(F::normalize(torch::randn(b.sizes(), gen), F::NormalizeFuncOptions().dim(-1)));
        else if (name.find("V_count_buffer") != std::string::npos) b.fill_(1.0);
    }
}

torch::Device ConstellationModel::device() const { return classifier->weight.device(); }

int64_t ConstellationModel::numParameters() const {
    int64_t n = 0;
    for (const auto& p : parameters(true)) n += p.numel();
    return n;
}

void ConstellationModel::setClassNames(const std::vector<std::string>& names) {
    if (!names.empty() && int64_t(names.size()) != config_.numClasses)
        throw Error("ConstellationNet: " + std::to_string(names.size()) + " class names given, the model has " +
                    std::to_string(config_.numClasses) + " classes");
    config_.classNames = names;
}

ConstellationImage ConstellationModel::preprocess(const cv::Mat& image) const {
    if (image.empty()) throw Error("ConstellationNet: the input image is empty");
    if (image.depth() != CV_8U || (image.channels() != 1 && image.channels() != 3))
        throw Error("ConstellationNet: expected an 8-bit grayscale or RGB image, got OpenCV type " +
                    std::to_string(image.type()));
    if (int64_t(image.rows) * image.cols > (int64_t(1) << 28))
        throw Error("ConstellationNet: image of " + std::to_string(image.cols) + "x" + std::to_string(image.rows) +
                    " pixels is larger than the limit of 2^28 pixels");
    const int S = int(config_.imageSize);
    cv::Mat rgb;
    if (image.channels() == 1) cv::cvtColor(image, rgb, cv::COLOR_GRAY2RGB);
    else rgb = image;
    ConstellationImage out;
    if (rgb.rows == S && rgb.cols == S) out.input = rgb.clone();
    else cv::resize(rgb, out.input, cv::Size(S, S), 0, 0, rgb.rows > S ? cv::INTER_AREA : cv::INTER_LINEAR);
    auto mean = torch::tensor({config_.mean[0], config_.mean[1], config_.mean[2]}, torch::kFloat).view({3, 1, 1});
    auto stdv = torch::tensor({config_.std[0], config_.std[1], config_.std[2]}, torch::kFloat).view({3, 1, 1});
    auto raw = torch::from_blob(out.input.data, {S, S, 3}, torch::kUInt8);
    out.tensor = (((raw.permute({2, 0, 1}).to(torch::kFloat) / 255.0) - mean) / stdv).contiguous();
    return out;
}

torch::Tensor ConstellationModel::runStage(torch::nn::ModuleList blocks, torch::Tensor x, int64_t firstBlock,
                                           std::vector<CellRecord>* records, const std::string& stage, int branch) {
    const bool resnet = config_.backbone == "resnet12";
    for (size_t i = 0; i < blocks->size(); ++i) {
        const int64_t b = firstBlock + int64_t(i);
        const std::string name = stage + "." + std::to_string(i);
        if (!resnet) {
            auto unit = blocks[i]->as<ConvUnitImpl>();
            x = F::max_pool2d(torch::relu(unit->forward(x, records, name, b + 1, branch)), F::MaxPool2dFuncOptions(2));
            continue;
        }
        auto blk = blocks[i]->as<ResBlockImpl>();
        const int64_t l0 = b * 3 + 1;
        auto y = leaky(blk->bn1(blk->mergeblock1->forward(x, records, name + ".mergeblock1", l0, branch)));
        y = leaky(blk->bn2(blk->mergeblock2->forward(y, records, name + ".mergeblock2", l0 + 1, branch)));
        y = blk->bn3(blk->mergeblock3->forward(y, records, name + ".mergeblock3", l0 + 2, branch));
        x = F::max_pool2d(leaky(y + blk->downsample->forward(x)), F::MaxPool2dFuncOptions(2));
        if (b >= 2 && is_training()) x = dropBlock(x, config_.dropBlock, config_.dropBlockSize);
    }
    return x;
}

ConstellationOutput ConstellationModel::forward(const torch::Tensor& images, const ForwardOptions& opts) {
    if (images.dim() != 4 || images.size(1) != 3)
        throw Error("ConstellationNet: expected images [B, 3, H, W], got " + std::to_string(images.dim()) + "-D");
    if (images.size(2) < 16 || images.size(3) < 16)
        throw Error("ConstellationNet: images must be at least 16x16 (4 poolings)");
    if (opts.branch == 2 && !config_.multiBranch) throw Error("ConstellationNet: branch 2 needs a multi-branch model");
    ConstellationOutput out;
    auto* rec = opts.record ? &out.records : nullptr;
    auto x = images.to(device());
    if (stem_) x = runStage(stem_, x, 0, rec, "stem", 0);
    const int64_t split = config_.splitBlock();
    for (int br = 1; br <= config_.numBranches(); ++br) {
        if (opts.branch > 0 && opts.branch != br) continue;
        auto y = runStage(br == 1 ? branch1_ : branch2_, x, split, rec, br == 1 ? "branch1" : "branch2",
                          config_.multiBranch ? br : 0);
        out.maps.push_back(y);
        out.pooled.push_back(y.mean({2, 3}));
        out.branches.push_back(br);
        if (br == 1) out.logits = classifier(out.pooled.back());
    }
    return out;
}

std::vector<torch::Tensor> ConstellationModel::fewShotFeatures(const ConstellationOutput& out) const {
    std::vector<torch::Tensor> f;
    for (size_t i = 0; i < out.pooled.size(); ++i) {
        f.push_back(out.pooled[i]);
        if (config_.featureAugment) f.push_back(out.maps[i].flatten(1));
    }
    return f;
}

std::vector<double> ConstellationModel::testWeights() const {
    // Sources per branch: pooled (+ flattened maps with feature_augment); weights in that order
    // from the multi-branch list [b1 pooled, b1 maps, b2 pooled, b2 maps].
    std::vector<double> w;
    const auto& tw = config_.testWeights;
    for (int br = 0; br < config_.numBranches(); ++br) {
        w.push_back(tw[std::min<size_t>(size_t(2 * br), tw.size() - 1)]);
        if (config_.featureAugment) w.push_back(tw[std::min<size_t>(size_t(2 * br + 1), tw.size() - 1)]);
    }
    return w;
}

torch::Tensor cosinePrototypeLogits(const torch::Tensor& support, const torch::Tensor& query, int64_t ways,
                                    int64_t shots) {
    if (support.size(0) != ways * shots)
        throw Error("ConstellationNet: " + std::to_string(support.size(0)) + " support features for " +
                    std::to_string(ways) + " ways x " + std::to_string(shots) + " shots");
    auto protos = support.view({ways, shots, -1}).mean(1);
    auto p = F::normalize(protos, F::NormalizeFuncOptions().dim(-1));
    auto q = F::normalize(query, F::NormalizeFuncOptions().dim(-1));
    return q.mm(p.t());
}

torch::Tensor ConstellationModel::fewShotLogits(const torch::Tensor& support, const torch::Tensor& query, int64_t ways,
                                                int64_t shots) {
    auto all = forward(torch::cat({support, query.to(support.device())}, 0));
    auto feats = fewShotFeatures(all);
    auto w = testWeights();
    const int64_t ns = support.size(0);
    torch::Tensor logits;
    for (size_t i = 0; i < feats.size(); ++i) {
        auto l = w[i] * cosinePrototypeLogits(feats[i].narrow(0, 0, ns), feats[i].narrow(0, ns, feats[i].size(0) - ns),
                                              ways, shots);
        logits = logits.defined() ? logits + l : l;
    }
    return logits;
}

std::vector<ConstellationModel::ModuleInfo> ConstellationModel::constellationModules() const {
    std::vector<ModuleInfo> mods;
    const bool resnet = config_.backbone == "resnet12";
    auto scan = [&](torch::nn::ModuleList list, const std::string& stage, int64_t first, int branch) {
        if (!list) return;
        for (size_t i = 0; i < list->size(); ++i) {
            const int64_t b = first + int64_t(i);
            const std::string name = stage + "." + std::to_string(i);
            std::vector<std::pair<std::string, std::shared_ptr<ConvUnitImpl>>> units;
            if (resnet) {
                auto blk = list[i]->as<ResBlockImpl>();
                units = {{name + ".mergeblock1", blk->mergeblock1.ptr()}, {name + ".mergeblock2", blk->mergeblock2.ptr()},
                         {name + ".mergeblock3", blk->mergeblock3.ptr()}};
            } else {
                units = {{name, std::dynamic_pointer_cast<ConvUnitImpl>(list[i])}};
            }
            for (size_t j = 0; j < units.size(); ++j)
                if (units[j].second->feat_cluster)
                    mods.push_back({units[j].first, b * config_.convsPerBlock() + int64_t(j) + 1, branch,
                                    bool(units[j].second->relation)});
        }
    };
    scan(stem_, "stem", 0, 0);
    scan(branch1_, "branch1", config_.splitBlock(), config_.multiBranch ? 1 : 0);
    scan(branch2_, "branch2", config_.splitBlock(), 2);
    return mods;
}

CellClustering ConstellationModel::clustering(const std::string& name) const {
    for (const auto& item : named_modules("", false)) {
        if (item.key() == "encoder." + name + ".feat_cluster")
            return CellClustering(std::dynamic_pointer_cast<CellClusteringImpl>(item.value()));
    }
    throw Error("ConstellationNet: no constellation module named '" + name + "'");
}

// ---- checkpoints --------------------------------------------------------------------------

std::shared_ptr<ConstellationModel> loadConstellation(const std::string& path) {
    Checkpoint ck = loadCheckpoint(path);
    if (ck.family != kFamily)
        throw Error(path + ": a " + (ck.family.empty() ? std::string("unnamed") : ck.family) +
                    " checkpoint, not a ConstellationNet one");
    auto cfg = ConstellationConfig::fromJsonString(ck.configJson, path);
    auto model = std::make_shared<ConstellationModel>(cfg);
    ck.tensors = officialTensorNames(cfg, std::move(ck.tensors));
    applyCheckpoint(ck, *model, kFamily, path);
    model->eval();
    return model;
}

std::map<std::string, torch::Tensor> officialTensorNames(const ConstellationConfig& config,
                                                         std::map<std::string, torch::Tensor> tensors, int* renamed) {
    if (renamed) *renamed = 0;
    if (config.backbone != "resnet12") return tensors;
    // encoder.<stage>.<block>.conv<N>.<rest>: the part after "encoder.<stage>.<block>.".
    static const std::regex old(R"(^(encoder\.(?:stem|branch1|branch2)\.\d+\.)conv([123])\.(.*)$)");
    std::map<std::string, torch::Tensor> out;
    for (auto& [name, t] : tensors) {
        std::smatch m;
        std::string to = name;
        if (std::regex_match(name, m, old)) {
            const std::string rest = m[3].str();
            to = rest.rfind("bn.", 0) == 0 ? m[1].str() + "bn" + m[2].str() + "." + rest.substr(3)
                                           : m[1].str() + "mergeblock" + m[2].str() + "." + rest;
            if (renamed) ++*renamed;
        }
        out[to] = std::move(t);
    }
    return out;
}

void saveConstellation(const ConstellationModel& model, const std::string& path) {
    saveCheckpoint(path, checkpointFromModule(model, kFamily, model.config().toJsonString()));
}

} // namespace glimpse::constellation
