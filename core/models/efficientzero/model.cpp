#include "core/models/efficientzero/model.h"

#include <torch/torch.h>

#include "core/error.h"

namespace glimpse::efficientzero {

namespace nn = torch::nn;
using torch::Tensor;

namespace {

constexpr double kEps = 0.001;

nn::Conv2d conv(int in, int out, int kernel, int stride = 1) {
    return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// The heads' 1x1 convolutions (conv1x1_reward / value / policy) have biases, as in the official
// EfficientZero network (PyTorch's default nn.Conv2d there).
nn::Conv2d conv1x1WithBias(int in, int out) { return nn::Conv2d(nn::Conv2dOptions(in, out, 1).bias(true)); }

// conv-BN-ReLU-conv-BN, plus the input (through a strided 3x3 conv when the shape changes), ReLU.
struct ResidualBlockImpl : nn::Module {
    ResidualBlockImpl(int in, int out, int stride = 1)
        : conv1(register_module("conv1", conv(in, out, 3, stride))),
          bn1(register_module("bn1", nn::BatchNorm2d(out))),
          conv2(register_module("conv2", conv(out, out, 3))),
          bn2(register_module("bn2", nn::BatchNorm2d(out))) {
        if (stride != 1 || in != out) downsample = register_module("downsample", conv(in, out, 3, stride));
    }
    Tensor forward(const Tensor& x) {
        Tensor out = bn2(conv2(torch::relu(bn1(conv1(x)))));
        return torch::relu(out + (downsample ? downsample(x) : x));
    }
    nn::Conv2d conv1;
    nn::BatchNorm2d bn1;
    nn::Conv2d conv2;
    nn::BatchNorm2d bn2;
    nn::Conv2d downsample{nullptr};
};
TORCH_MODULE(ResidualBlock);

nn::Sequential residualStack(int n, int channels) {
    nn::Sequential s;
    for (int i = 0; i < n; ++i) s->push_back(ResidualBlock(channels, channels));
    return s;
}

// Linear-BN-ReLU per hidden size, then a Linear (zeroed when zeroLast).
nn::Sequential mlp(int64_t in, const std::vector<int>& hidden, int64_t out, bool zeroLast) {
    nn::Sequential s;
    for (int h : hidden) {
        s->push_back(nn::Linear(in, h));
        s->push_back(nn::BatchNorm1d(h));
        s->push_back(nn::ReLU());
        in = h;
    }
    nn::Linear last(in, out);
    if (zeroLast) {
        torch::NoGradGuard guard;
        last->weight.zero_();
        last->bias.zero_();
    }
    s->push_back(last);
    return s;
}

// The Atari stem: 96x96 -> 48 (conv s2) -> 24 (residual s2) -> 12 (pool) -> 6 (pool).
struct DownSampleImpl : nn::Module {
    DownSampleImpl(int in, int out, int blocks)
        : conv1(register_module("conv1", conv(in, out / 2, 3, 2))),
          bn1(register_module("bn1", nn::BatchNorm2d(out / 2))),
          resblocks1(register_module("resblocks1", residualStack(blocks, out / 2))),
          downsample_block(register_module("downsample_block", ResidualBlock(out / 2, out, 2))),
          resblocks2(register_module("resblocks2", residualStack(blocks, out))),
          pooling1(register_module("pooling1", nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1)))),
          resblocks3(register_module("resblocks3", residualStack(blocks, out))),
          pooling2(register_module("pooling2", nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1)))) {}
    Tensor forward(Tensor x) {
        x = torch::relu(bn1(conv1(x)));
        x = downsample_block(resblocks1->forward(x));
        x = pooling1(resblocks2->forward(x));
        return pooling2(resblocks3->forward(x));
    }
    nn::Conv2d conv1;
    nn::BatchNorm2d bn1;
    nn::Sequential resblocks1;
    ResidualBlock downsample_block;
    nn::Sequential resblocks2;
    nn::AvgPool2d pooling1;
    nn::Sequential resblocks3;
    nn::AvgPool2d pooling2;
};
TORCH_MODULE(DownSample);

struct RepresentationImpl : nn::Module {
    explicit RepresentationImpl(const Config& c) {
        if (c.downsample) {
            downsample_net =
                register_module("downsample_net", DownSample(c.inputChannels(), c.channels, c.downsampleBlocks));
        } else {
            conv1 = register_module("conv", conv(c.inputChannels(), c.channels, 3));
            bn = register_module("bn", nn::BatchNorm2d(c.channels));
        }
        resblocks = register_module("resblocks", residualStack(c.blocks, c.channels));
    }
    Tensor forward(const Tensor& obs) {
        Tensor x = downsample_net ? downsample_net(obs) : torch::relu(bn(conv1(obs)));
        return resblocks->forward(x);
    }
    DownSample downsample_net{nullptr};
    nn::Conv2d conv1{nullptr};
    nn::BatchNorm2d bn{nullptr};
    nn::Sequential resblocks;
};
TORCH_MODULE(Representation);

struct DynamicsImpl : nn::Module {
    explicit DynamicsImpl(const Config& c)
        : conv1(register_module("conv", conv(c.channels + c.actionPlanes(), c.channels, 3))),
          bn(register_module("bn", nn::BatchNorm2d(c.channels))),
          resblocks(register_module("resblocks", residualStack(c.blocks, c.channels))),
          conv1x1_reward(register_module("conv1x1_reward", conv1x1WithBias(c.channels, c.reducedChannelsReward))),
          bn_reward(register_module("bn_reward", nn::BatchNorm2d(c.reducedChannelsReward))),
          lstm(register_module("lstm", nn::LSTM(nn::LSTMOptions(int64_t(c.reducedChannelsReward) * c.stateHeight() *
                                                                     c.stateWidth(),
                                                                 c.lstmHidden)))),
          bn_value_prefix(register_module("bn_value_prefix", nn::BatchNorm1d(c.lstmHidden))),
          fc(register_module("fc", mlp(c.lstmHidden, c.rewardHidden, c.supportBins(), true))) {}

    // Returns (next state, value-prefix logits, LSTM state).
    std::tuple<Tensor, Tensor, LstmState> forward(const Tensor& stateAction, const Tensor& state,
                                                  const LstmState& hidden) {
        Tensor x = torch::relu(bn(conv1(stateAction)) + state);
        x = resblocks->forward(x);
        Tensor r = torch::relu(bn_reward(conv1x1_reward(x))).flatten(1).unsqueeze(0);
        auto [out, next] = lstm(r, std::make_tuple(hidden.first, hidden.second));
        Tensor prefix = fc->forward(torch::relu(bn_value_prefix(out.squeeze(0))));
        return {x, prefix, {std::get<0>(next), std::get<1>(next)}};
    }
    nn::Conv2d conv1;
    nn::BatchNorm2d bn;
    nn::Sequential resblocks;
    nn::Conv2d conv1x1_reward;
    nn::BatchNorm2d bn_reward;
    nn::LSTM lstm;
    nn::BatchNorm1d bn_value_prefix;
    nn::Sequential fc;
};
TORCH_MODULE(Dynamics);

struct PredictionImpl : nn::Module {
    explicit PredictionImpl(const Config& c)
        : resblocks(register_module("resblocks", residualStack(c.blocks, c.channels))),
          conv1x1_value(register_module("conv1x1_value", conv1x1WithBias(c.channels, c.reducedChannelsValue))),
          conv1x1_policy(register_module("conv1x1_policy", conv1x1WithBias(c.channels, c.reducedChannelsPolicy))),
          bn_value(register_module("bn_value", nn::BatchNorm2d(c.reducedChannelsValue))),
          bn_policy(register_module("bn_policy", nn::BatchNorm2d(c.reducedChannelsPolicy))),
          fc_value(register_module("fc_value", mlp(int64_t(c.reducedChannelsValue) * c.stateHeight() * c.stateWidth(),
                                                   c.valueHidden, c.supportBins(), true))),
          fc_policy(register_module("fc_policy", mlp(int64_t(c.reducedChannelsPolicy) * c.stateHeight() * c.stateWidth(),
                                                     c.policyHidden, c.numActions, true))) {}
    // Returns (value logits, policy logits).
    std::pair<Tensor, Tensor> forward(const Tensor& state) {
        Tensor x = resblocks->forward(state);
        Tensor v = torch::relu(bn_value(conv1x1_value(x))).flatten(1);
        Tensor p = torch::relu(bn_policy(conv1x1_policy(x))).flatten(1);
        return {fc_value->forward(v), fc_policy->forward(p)};
    }
    nn::Sequential resblocks;
    nn::Conv2d conv1x1_value, conv1x1_policy;
    nn::BatchNorm2d bn_value, bn_policy;
    nn::Sequential fc_value, fc_policy;
};
TORCH_MODULE(Prediction);

nn::Sequential makeProjection(const Config& c) {
    return nn::Sequential(nn::Linear(c.stateNumel(), c.projHidden), nn::BatchNorm1d(c.projHidden), nn::ReLU(),
                          nn::Linear(c.projHidden, c.projHidden), nn::BatchNorm1d(c.projHidden), nn::ReLU(),
                          nn::Linear(c.projHidden, c.projOut), nn::BatchNorm1d(c.projOut));
}

nn::Sequential makeProjectionHead(const Config& c) {
    return nn::Sequential(nn::Linear(c.projOut, c.predHidden), nn::BatchNorm1d(c.predHidden), nn::ReLU(),
                          nn::Linear(c.predHidden, c.projOut));
}

} // namespace

// The dynamics' action input: one plane a / |A|, or |A| one-hot planes.
static Tensor actionPlanes(const Config& c, const Tensor& state, const Tensor& actions) {
    const int64_t b = state.size(0);
    if (c.oneHotActions)
        return torch::one_hot(actions.to(torch::kLong), c.numActions)
            .to(state.options())
            .view({b, c.numActions, 1, 1})
            .expand({b, c.numActions, state.size(2), state.size(3)});
    return (actions.to(state.options()).view({b, 1, 1, 1}) / double(c.numActions)).expand({b, 1, state.size(2), state.size(3)});
}

int addMissingHeadBiases(std::map<std::string, Tensor>& tensors) {
    int added = 0;
    for (const char* head : {"dynamics_network.conv1x1_reward", "prediction_network.conv1x1_value",
                             "prediction_network.conv1x1_policy"}) {
        const std::string weight = std::string(head) + ".weight", bias = std::string(head) + ".bias";
        auto w = tensors.find(weight);
        if (w == tensors.end() || tensors.count(bias) || w->second.dim() != 4) continue;
        tensors[bias] = torch::zeros({w->second.size(0)}, w->second.options());
        ++added;
    }
    return added;
}

Tensor scalarTransform(const Tensor& x) {
    return torch::sign(x) * (torch::sqrt(torch::abs(x) + 1) - 1) + kEps * x;
}

Tensor inverseScalarTransform(const Tensor& y) {
    Tensor root = (torch::sqrt(1 + 4 * kEps * (torch::abs(y) + 1 + kEps)) - 1) / (2 * kEps);
    return torch::sign(y) * (root * root - 1);
}

Tensor scalarToSupport(const Tensor& x, int supportSize) {
    const Tensor y = scalarTransform(x).clamp(-supportSize, supportSize);
    const Tensor low = torch::floor(y);
    const Tensor high = y - low;  // weight of the upper neighbour
    const Tensor lowIdx = (low + supportSize).to(torch::kLong).unsqueeze(-1);
    const Tensor highIdx = (lowIdx + 1).clamp_max(2 * supportSize);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.push_back(2 * supportSize + 1);
    Tensor target = torch::zeros(shape, x.options());
    target.scatter_add_(-1, lowIdx, (1 - high).unsqueeze(-1));
    target.scatter_add_(-1, highIdx, high.unsqueeze(-1));
    return target;
}

// The scalar of an expectation over the support bins (values within kEps of 0 become 0).
static Tensor scalarOfExpectation(const Tensor& expectation) {
    const Tensor v = inverseScalarTransform(expectation);
    return torch::where(torch::abs(v) < kEps, torch::zeros_like(v), v);
}

Tensor supportToScalar(const Tensor& logits, int supportSize) {
    if (logits.size(-1) != 2 * supportSize + 1)
        throw Error("efficientzero: support logits have " + std::to_string(logits.size(-1)) + " bins, expected " +
                    std::to_string(2 * supportSize + 1));
    const Tensor support = torch::arange(-supportSize, supportSize + 1, logits.options());
    return scalarOfExpectation((torch::softmax(logits, -1) * support).sum(-1));
}

Tensor negativeCosineSimilarity(const Tensor& prediction, const Tensor& target) {
    namespace F = torch::nn::functional;
    const auto opts = F::NormalizeFuncOptions().p(2.0).dim(1).eps(1e-5);
    return -(F::normalize(prediction, opts) * F::normalize(target.detach(), opts)).sum(1);
}

namespace {

// ---- folded inference (Network::setFoldedInference) -----------------------------------------
// Eval-mode BatchNorm is an affine map per channel; folded into the convolution or linear layer
// before it, the same function runs without the normalization passes (docs/performance.md).
struct FConv {
    Tensor w, b;
    int64_t stride = 1, pad = 0;
    Tensor operator()(const Tensor& x) const { return torch::conv2d(x, w, b, stride, pad); }
};

// The folds below compute in float64 and round once to the weights' type: each folded weight is
// then the float32 nearest the exact product (float32 arithmetic rounded twice, and the search
// amplifies such differences at its near-ties; docs/performance.md "Third pass").
Tensor f64(const Tensor& t) { return t.detach().to(torch::kDouble); }

// BatchNorm's per-channel scale gamma / sqrt(var + eps), in float64.
template <typename Bn>
Tensor bnScale(Bn& bn) {
    return f64(bn.weight) / torch::sqrt(f64(bn.running_var) + bn.options.eps());
}

// BatchNorm2d after conv (whose bias may be undefined): the conv's weight scaled per output
// channel, the BN's shift as its bias.
FConv foldConvBn(nn::Conv2dImpl& conv, nn::BatchNorm2dImpl* bn) {
    FConv f;
    f.stride = (*conv.options.stride())[0];
    f.pad = conv.weight.size(2) / 2;   // conv() and conv1x1WithBias() pad by half the (odd) kernel
    if (!bn) {
        f.w = conv.weight.detach().clone();
        if (conv.bias.defined()) f.b = conv.bias.detach().clone();
        return f;
    }
    const auto type = conv.weight.scalar_type();
    const Tensor scale = bnScale(*bn);
    f.w = (f64(conv.weight) * scale.view({-1, 1, 1, 1})).to(type);
    const Tensor bias = conv.bias.defined() ? f64(conv.bias) : torch::zeros_like(scale);
    f.b = ((bias - f64(bn->running_mean)) * scale + f64(bn->bias)).to(type);
    return f;
}

struct FBlock {
    FConv c1, c2, down;   // down.w undefined: identity shortcut
    Tensor operator()(const Tensor& x) const {
        Tensor out = c2(torch::relu(c1(x)));
        return torch::relu(out + (down.w.defined() ? down(x) : x));
    }
};

FBlock foldBlock(ResidualBlockImpl& r) {
    FBlock f{foldConvBn(*r.conv1, r.bn1.get()), foldConvBn(*r.conv2, r.bn2.get()), {}};
    if (r.downsample) f.down = foldConvBn(*r.downsample, nullptr);
    return f;
}

std::vector<FBlock> foldStack(nn::Sequential& s) {
    std::vector<FBlock> out;
    for (auto& m : s->children()) out.push_back(foldBlock(*m->as<ResidualBlockImpl>()));
    return out;
}

Tensor runStack(const std::vector<FBlock>& blocks, Tensor x) {
    for (const auto& b : blocks) x = b(x);
    return x;
}

// A weight stored transposed ([in, out] contiguous) and seen through .t() as [out, in]: torch::linear
// then hands OpenBLAS a contiguous W^T, whose non-transposed path packs faster (a [8, 3600] x
// [3600, 128] product: 194 -> 138 us), with bit for bit the same result (docs/performance.md
// "Fifth pass").
Tensor transposedStorage(const Tensor& w) { return w.detach().t().contiguous().t(); }

// mlp(): [Linear, BatchNorm1d, ReLU] * k, Linear -> k + 1 linear layers, ReLU between them.
struct FMlp {
    std::vector<std::pair<Tensor, Tensor>> layers;
    Tensor operator()(Tensor x) const {
        for (size_t i = 0; i < layers.size(); ++i) {
            x = torch::linear(x, layers[i].first, layers[i].second);
            if (i + 1 < layers.size()) x = torch::relu(x);
        }
        return x;
    }
};

// The dynamics' one-layer LSTM, one step through torch::lstm_cell on transposed-storage weights:
// the same bits as nn::LSTM on a sequence of length 1, without the module's per-call checks and
// flat-weight handling.
struct FLstm {
    Tensor wih, whh, bih, bhh;
    // x [B, in], h and c [1, B, hidden] -> (h', c'), each [1, B, hidden]
    std::pair<Tensor, Tensor> operator()(const Tensor& x, const Tensor& h, const Tensor& c) const {
        auto [hy, cy] = torch::lstm_cell(x, {h.squeeze(0), c.squeeze(0)}, wih, whh, bih, bhh);
        return {hy.unsqueeze(0), cy.unsqueeze(0)};
    }
};

FLstm foldLstm(nn::LSTMImpl& lstm) {
    if (lstm.options.num_layers() != 1 || !lstm.options.bias() || lstm.options.bidirectional() ||
        lstm.options.proj_size() != 0 || lstm.options.batch_first())
        throw Error("efficientzero: folded inference needs a one-layer, unidirectional LSTM with biases");
    const auto p = lstm.named_parameters(false);
    return FLstm{transposedStorage(p["weight_ih_l0"]), transposedStorage(p["weight_hh_l0"]),
                 p["bias_ih_l0"].detach().clone(), p["bias_hh_l0"].detach().clone()};
}

FMlp foldMlp(nn::Sequential& s) {
    FMlp f;
    const auto children = s->children();
    for (size_t i = 0; i < children.size(); ++i) {
        auto* lin = children[i]->as<nn::LinearImpl>();
        if (!lin) continue;
        auto* bn = i + 1 < children.size() ? children[i + 1]->as<nn::BatchNorm1dImpl>() : nullptr;
        if (!bn) {
            f.layers.emplace_back(transposedStorage(lin->weight), lin->bias.detach().clone());
            continue;
        }
        const auto type = lin->weight.scalar_type();
        const Tensor scale = bnScale(*bn);
        f.layers.emplace_back(transposedStorage((f64(lin->weight) * scale.view({-1, 1})).to(type)),
                              ((f64(lin->bias) - f64(bn->running_mean)) * scale + f64(bn->bias)).to(type));
    }
    return f;
}

struct Folded {
    int64_t version = -1;                 // sum of the parameters' and buffers' version counters
    bool downsample = false;
    FConv stem;                           // representation: conv + bn (also downsample_net.conv1 + bn1)
    std::vector<FBlock> rb1, rb2, rb3, rep;
    FBlock dsBlock;
    FConv dynConv, reward;
    FConv dynState;                       // dynConv's weights on the state channels, without bias
    Tensor dynWeightAction;               // dynConv's weights on the action planes [C, P, k, k]
    Tensor support;                       // -S..S, the value and value-prefix bins
    std::vector<FBlock> dyn, pred;
    FLstm lstm;
    Tensor vpScale, vpShift;              // bn_value_prefix (after the LSTM, before a ReLU)
    FMlp fc, fcValue, fcPolicy;
    FConv value, policy;
};

} // namespace

struct Network::Impl : nn::Module {
    explicit Impl(const Config& c)
        : config(c),
          representation_network(register_module("representation_network", Representation(c))),
          dynamics_network(register_module("dynamics_network", Dynamics(c))),
          prediction_network(register_module("prediction_network", Prediction(c))),
          projection(register_module("projection", makeProjection(c))),
          projection_head(register_module("projection_head", makeProjectionHead(c))) {}
    Config config;
    Representation representation_network;
    Dynamics dynamics_network;
    Prediction prediction_network;
    nn::Sequential projection, projection_head;

    bool foldedInference = false;
    Folded folded;

    // The parameters and buffers whose version counters fold() watches, listed once (listing them
    // by name on every call cost 2-3% of a search, docs/performance.md); the module's tensors are
    // changed in place (training, loading), never replaced.
    std::vector<Tensor> watched;
    int64_t weightsVersion() {
        if (watched.empty()) {
            watched = parameters();
            for (const auto& t : buffers()) watched.push_back(t);
        }
        int64_t v = 0;
        for (const auto& t : watched) v += int64_t(t._version());
        return v;
    }
    // The folded network when it applies (on, eval mode, no gradients), rebuilt whenever a
    // weight or statistic changed in place since the last fold (training, checkpoint loading).
    const Folded* fast() {
        if (!foldedInference || is_training() || torch::GradMode::is_enabled()) return nullptr;
        const int64_t v = weightsVersion();
        // (a device move keeps the tensors and their versions: the device is checked too)
        if (v == folded.version && folded.dynConv.w.defined() &&
            folded.dynConv.w.device() == dynamics_network->conv1->weight.device())
            return &folded;
        torch::NoGradGuard noGrad;
        Folded f;
        auto& r = *representation_network;
        f.downsample = bool(r.downsample_net);
        if (f.downsample) {
            auto& d = *r.downsample_net;
            f.stem = foldConvBn(*d.conv1, d.bn1.get());
            f.rb1 = foldStack(d.resblocks1);
            f.dsBlock = foldBlock(*d.downsample_block);
            f.rb2 = foldStack(d.resblocks2);
            f.rb3 = foldStack(d.resblocks3);
        } else {
            f.stem = foldConvBn(*r.conv1, r.bn.get());
        }
        f.rep = foldStack(r.resblocks);
        auto& g = *dynamics_network;
        f.dynConv = foldConvBn(*g.conv1, g.bn.get());
        {
            const int64_t cs = config.channels;
            f.dynState = FConv{f.dynConv.w.narrow(1, 0, cs).contiguous(), Tensor(), f.dynConv.stride, f.dynConv.pad};
            f.dynWeightAction = f.dynConv.w.narrow(1, cs, f.dynConv.w.size(1) - cs).contiguous();
        }
        f.support = torch::arange(-config.supportSize, config.supportSize + 1, f.dynConv.w.options());
        f.dyn = foldStack(g.resblocks);
        f.reward = foldConvBn(*g.conv1x1_reward, g.bn_reward.get());
        {
            auto& bn = *g.bn_value_prefix;
            const Tensor scale = bnScale(bn);
            f.vpScale = scale.to(bn.weight.scalar_type());
            f.vpShift = (f64(bn.bias) - f64(bn.running_mean) * scale).to(bn.weight.scalar_type());
        }
        f.lstm = foldLstm(*g.lstm);
        f.fc = foldMlp(g.fc);
        auto& p = *prediction_network;
        f.pred = foldStack(p.resblocks);
        f.value = foldConvBn(*p.conv1x1_value, p.bn_value.get());
        f.policy = foldConvBn(*p.conv1x1_policy, p.bn_policy.get());
        f.fcValue = foldMlp(p.fc_value);
        f.fcPolicy = foldMlp(p.fc_policy);
        f.version = v;
        folded = std::move(f);
        return &folded;
    }

    Tensor represent(const Folded& f, const Tensor& obs) {
        if (!f.downsample) return runStack(f.rep, torch::relu(f.stem(obs)));
        auto& d = *representation_network->downsample_net;
        Tensor x = torch::relu(f.stem(obs));
        x = f.dsBlock(runStack(f.rb1, x));
        x = d.pooling1(runStack(f.rb2, x));
        x = d.pooling2(runStack(f.rb3, x));
        return runStack(f.rep, x);
    }
    std::pair<Tensor, Tensor> predict(const Folded& f, const Tensor& state) {
        Tensor x = runStack(f.pred, state);
        return {f.fcValue(torch::relu(f.value(x)).flatten(1)), f.fcPolicy(torch::relu(f.policy(x)).flatten(1))};
    }
    // The action planes are constant per channel, so their share of the dynamics convolution is
    // one map per action: dynConv(cat(state, planes(a))) = conv(state, W_state) + map[a], maps
    // made once per weights and latent size (float32 sums in another order, nothing else).
    Tensor actionMaps(const Folded& f, const Tensor& state) {
        if (mapsVersion == f.version && maps.defined() && maps.size(2) == state.size(2) &&
            maps.size(3) == state.size(3) && maps.device() == state.device())
            return maps;
        const int64_t a = config.numActions;
        const Tensor zeros = torch::zeros({a, config.channels, state.size(2), state.size(3)}, state.options());
        const Tensor planes =
            actionPlanes(config, zeros, torch::arange(a, torch::TensorOptions(torch::kLong).device(state.device())));
        maps = torch::conv2d(planes, f.dynWeightAction, f.dynConv.b, f.dynConv.stride, f.dynConv.pad);
        mapsVersion = f.version;
        return maps;
    }
    Tensor maps;                  // [A, C, h, w] for the folded weights of version mapsVersion
    int64_t mapsVersion = -1;
    // supportToScalar with the kept support vector and the expectation as one product.
    Tensor supportScalar(const Folded& f, const Tensor& logits) {
        return scalarOfExpectation(torch::matmul(torch::softmax(logits, -1), f.support));
    }
    std::tuple<Tensor, Tensor, LstmState> dynamics(const Folded& f, const Tensor& state, const Tensor& actions,
                                                   const LstmState& hidden) {
        Tensor x0 = f.dynState(state) + actionMaps(f, state).index_select(0, actions) + state;
        Tensor x = runStack(f.dyn, torch::relu(x0));
        Tensor r = torch::relu(f.reward(x)).flatten(1);
        auto [h, c] = f.lstm(r, hidden.first, hidden.second);
        Tensor prefix = f.fc(torch::relu(torch::addcmul(f.vpShift, h.squeeze(0), f.vpScale)));
        return {x, prefix, {h, c}};
    }
};

Network::Network(const Config& config) {
    config.validate();
    impl_ = std::make_shared<Impl>(config);
}

const Config& Network::config() const { return impl_->config; }

InitialOutput Network::initialInference(const Tensor& obs) {
    const Config& c = impl_->config;
    if (obs.dim() != 4 || obs.size(1) != c.inputChannels() || obs.size(2) != c.obsHeight || obs.size(3) != c.obsWidth)
        throw Error("efficientzero: observation batch has shape " + c10::str(obs.sizes()) + ", expected [B, " +
                    std::to_string(c.inputChannels()) + ", " + std::to_string(c.obsHeight) + ", " +
                    std::to_string(c.obsWidth) + "]");
    InitialOutput out;
    if (const Folded* f = impl_->fast()) {
        out.state = impl_->represent(*f, obs.to(torch::kFloat) * c.obsScale);
        std::tie(out.valueLogits, out.policyLogits) = impl_->predict(*f, out.state);
    } else {
        out.state = impl_->representation_network(obs.to(torch::kFloat) * c.obsScale);
        std::tie(out.valueLogits, out.policyLogits) = impl_->prediction_network(out.state);
    }
    out.value = supportToScalar(out.valueLogits, c.supportSize);
    return out;
}

RecurrentOutput Network::recurrentInference(const Tensor& state, const Tensor& actions, const LstmState& lstm) {
    const Config& c = impl_->config;
    const int64_t b = state.size(0);
    if (actions.dim() != 1 || actions.size(0) != b)
        throw Error("efficientzero: recurrentInference needs one action per state (" + std::to_string(b) + "), got shape " +
                    c10::str(actions.sizes()));
    RecurrentOutput out;
    if (const Folded* f = impl_->fast()) {
        std::tie(out.nextState, out.valuePrefixLogits, out.lstm) = impl_->dynamics(*f, state, actions.to(torch::kLong), lstm);
        std::tie(out.valueLogits, out.policyLogits) = impl_->predict(*f, out.nextState);
        // Both expectations in one pass: the scalar transform is about 16 small operations, each
        // costing more in dispatch than in arithmetic at these sizes (rows are independent).
        const Tensor scalars = impl_->supportScalar(*f, torch::cat({out.valuePrefixLogits, out.valueLogits}, 0));
        out.valuePrefix = scalars.narrow(0, 0, b);
        out.value = scalars.narrow(0, b, b);
        return out;
    }
    const Tensor plane = actionPlanes(c, state, actions);
    std::tie(out.nextState, out.valuePrefixLogits, out.lstm) =
        impl_->dynamics_network(torch::cat({state, plane}, 1), state, lstm);
    std::tie(out.valueLogits, out.policyLogits) = impl_->prediction_network(out.nextState);
    out.valuePrefix = supportToScalar(out.valuePrefixLogits, c.supportSize);
    out.value = supportToScalar(out.valueLogits, c.supportSize);
    return out;
}

Tensor Network::represent(const Tensor& obs) {
    const Config& c = impl_->config;
    if (obs.dim() != 4 || obs.size(1) != c.inputChannels() || obs.size(2) != c.obsHeight || obs.size(3) != c.obsWidth)
        throw Error("efficientzero: observation batch has shape " + c10::str(obs.sizes()) + ", expected [B, " +
                    std::to_string(c.inputChannels()) + ", " + std::to_string(c.obsHeight) + ", " +
                    std::to_string(c.obsWidth) + "]");
    return impl_->representation_network(obs.to(torch::kFloat) * c.obsScale);
}

std::tuple<Tensor, Tensor, LstmState> Network::dynamics(const Tensor& state, const Tensor& actions, const LstmState& lstm) {
    const Config& c = impl_->config;
    const int64_t b = state.size(0);
    if (actions.dim() != 1 || actions.size(0) != b)
        throw Error("efficientzero: dynamics needs one action per state (" + std::to_string(b) + "), got shape " +
                    c10::str(actions.sizes()));
    const Tensor plane = actionPlanes(c, state, actions);
    return impl_->dynamics_network(torch::cat({state, plane}, 1), state, lstm);
}

std::pair<Tensor, Tensor> Network::predict(const Tensor& state) { return impl_->prediction_network(state); }

LstmState Network::initialLstm(int64_t batch) const {
    auto opts = torch::TensorOptions().device(device());
    return {torch::zeros({1, batch, impl_->config.lstmHidden}, opts),
            torch::zeros({1, batch, impl_->config.lstmHidden}, opts)};
}

Tensor Network::project(const Tensor& state, bool withGrad) {
    Tensor proj = impl_->projection->forward(state.flatten(1));
    return withGrad ? impl_->projection_head->forward(proj) : proj.detach();
}

void Network::setFoldedInference(bool on) {
    impl_->foldedInference = on;
    impl_->folded = Folded{};
}
bool Network::foldedInference() const { return impl_->foldedInference; }

nn::Module& Network::module() { return *impl_; }
void Network::train(bool on) { impl_->train(on); }
bool Network::isTraining() const { return impl_->is_training(); }
void Network::setDynamicsTraining(bool on) { impl_->dynamics_network->train(on); }
bool Network::isDynamicsTraining() const { return impl_->dynamics_network->is_training(); }
std::vector<Tensor> Network::parameters() const { return impl_->parameters(); }

int64_t Network::parameterCount() const {
    int64_t n = 0;
    for (const auto& p : impl_->parameters()) n += p.numel();
    return n;
}

torch::Device Network::device() const {
    auto params = impl_->parameters();
    return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

} // namespace glimpse::efficientzero
