#pragma once
// A tiny EfficientZero network configuration for a built-in game, shared by the tests that run
// a network on episodes (fast: a few thousand parameters).
#include <string>

#include "core/models/efficientzero/config.h"
#include "core/rl/env.h"

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

} // namespace glimpse::testing
