#pragma once
// A tiny EfficientZero network configuration for a built-in game, shared by the tests that run
// a network on episodes (fast: a few thousand parameters).
#include <string>

#include <torch/torch.h>

#include "core/io/checkpoint.h"
#include "core/models/efficientzero/config.h"
#include "core/models/efficientzero/model.h"
#include "core/models/efficientzero/train.h"
#include "core/rl/env.h"
#include "core/rl/shared_space.h"

namespace glimpse::testing {

inline efficientzero::Config tinyEfficientZeroConfig(const std::string& game) {
    auto env = rl::makeEnv(game);
    const auto s = env->observationShape();
    auto c = efficientzero::Config::grid(s.channels, s.height, s.width, env->numActions());
    c.channels = 4;
    c.lstmHidden = 8;
    c.reducedChannelsReward = c.reducedChannelsValue = c.reducedChannelsPolicy = 2;
    c.supportSize = 10;
    c.projHidden = c.projOut = 8;
    c.predHidden = 4;
    c.rewardHidden = c.valueHidden = c.policyHidden = {8};
    c.validate();
    return c;
}

// An EfficientZero checkpoint of `env` (the CPU network) with random weights nudged away from
// their initialization, so its policy and value are neither uniform nor 0: a stand-in teacher
// for XTRA's offline tasks. Written to DIR/teacher_GAME[_shared].h5; returns the path.
inline std::string saveRandomTeacher(const std::string& dir, const std::string& env, uint64_t seed) {
    torch::manual_seed(seed);
    const auto e = rl::makeEnv(env);
    const efficientzero::Config c = efficientzero::cpuNetwork(*e);
    efficientzero::Network net(c);
    torch::NoGradGuard ng;
    for (auto& p : net.module().parameters()) p.add_(torch::randn_like(p) * 0.05);
    const std::string path = dir + "/teacher_" + rl::baseGameName(env) + (rl::isSharedName(env) ? "_shared" : "") + ".h5";
    saveCheckpoint(path, checkpointFromModule(net.module(), "efficientzero", c.toJson().dump()));
    return path;
}

} // namespace glimpse::testing
