#include "core/train/state.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <torch/torch.h>

#include "core/error.h"
#include "core/io/checkpoint.h"
#include "core/util/json_file.h"

namespace glimpse::train {

void saveTrainState(const std::string& path, const std::string& family, const TrainState& state) {
    Checkpoint c;
    c.family = family;
    c.configJson = state.meta.dump();
    for (const auto& [k, v] : state.model) c.tensors["model." + k] = v.detach().cpu().contiguous();
    for (const auto& [k, v] : state.optimizer) c.tensors["optim." + k] = v.detach().cpu().contiguous();
    for (const auto& [k, v] : state.aux) c.tensors["aux." + k] = v.detach().cpu().contiguous();
    saveCheckpoint(path, c);
}

TrainState loadTrainState(const std::string& path, const std::string& family) {
    Checkpoint c = loadCheckpoint(path);
    if (c.family != family)
        throw Error(path + ": a '" + c.family + "' checkpoint, expected training state '" + family + "'");
    TrainState s;
    s.meta = parseJsonText(c.configJson, path, "training state");
    if (!s.meta.is_object()) throw Error(path + ": training state JSON is not an object");
    for (auto& [k, v] : c.tensors) {
        if (k.rfind("model.", 0) == 0) s.model[k.substr(6)] = v;
        else if (k.rfind("optim.", 0) == 0) s.optimizer[k.substr(6)] = v;
        else if (k.rfind("aux.", 0) == 0) s.aux[k.substr(4)] = v;
        else throw Error(path + ": unexpected tensor '" + k + "' in training state");
    }
    return s;
}

std::map<std::string, torch::Tensor> moduleTensors(const torch::nn::Module& m) {
    std::map<std::string, torch::Tensor> t;
    for (const auto& p : m.named_parameters()) t[p.key()] = p.value().detach().cpu().clone();
    for (const auto& b : m.named_buffers()) t[b.key()] = b.value().detach().cpu().clone();
    return t;
}

void loadModuleTensors(torch::nn::Module& m, const std::map<std::string, torch::Tensor>& t,
                       const std::string& source) {
    std::vector<std::pair<torch::Tensor, torch::Tensor>> todo;
    size_t seen = 0;
    auto take = [&](const std::string& name, torch::Tensor& dst) {
        auto it = t.find(name);
        if (it == t.end()) throw Error(source + ": lacks model tensor '" + name + "'");
        if (it->second.sizes() != dst.sizes())
            throw Error(source + ": model tensor '" + name + "' has the wrong shape");
        todo.push_back({dst, it->second});
        ++seen;
    };
    for (auto& p : m.named_parameters()) take(p.key(), p.value());
    for (auto& b : m.named_buffers()) take(b.key(), b.value());
    if (seen != t.size()) throw Error(source + ": holds model tensors the model does not have");
    torch::NoGradGuard ng;
    for (auto& [dst, src] : todo) dst.copy_(src.to(dst.device(), dst.scalar_type()));
}

uint64_t mixSeed(uint64_t seed, uint64_t a, uint64_t b) {
    auto mix = [](uint64_t x) {
        x += 0x9e3779b97f4a7c15ULL;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
    };
    return mix(mix(mix(seed) ^ a) ^ (b * 0x632be59bd9b4e019ULL));
}

int64_t shuffledIndex(uint64_t seed, int64_t size, int64_t pos) {
    if (size <= 0) throw Error("shuffledIndex: empty dataset");
    const int64_t epoch = pos / size, at = pos % size;
    // Cache the permutation of the last epoch asked for (per thread).
    thread_local uint64_t cachedSeed = 0;
    thread_local int64_t cachedEpoch = -1, cachedSize = -1;
    thread_local std::vector<int64_t> perm;
    if (cachedEpoch != epoch || cachedSize != size || cachedSeed != seed) {
        perm.resize(size_t(size));
        std::iota(perm.begin(), perm.end(), int64_t(0));
        std::mt19937_64 rng(mixSeed(seed, 0x5eed, uint64_t(epoch)));
        for (int64_t i = size - 1; i > 0; --i) {   // Fisher-Yates with an explicit draw (portable)
            const int64_t j = int64_t(rng() % uint64_t(i + 1));
            std::swap(perm[size_t(i)], perm[size_t(j)]);
        }
        cachedSeed = seed;
        cachedEpoch = epoch;
        cachedSize = size;
    }
    return perm[size_t(at)];
}

} // namespace glimpse::train
