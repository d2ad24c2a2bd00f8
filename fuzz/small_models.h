#pragma once
// The small model of each family that the checkpoint targets apply checkpoints to, and that
// make_seeds.cpp writes the seed checkpoints and traces from (so seeds reach the success path).
#include "core/models/coat/config.h"
#include "core/models/constellation/config.h"
#include "core/models/efficientzero/config.h"
#include "core/models/letr/config.h"

namespace glimpse::fuzz {

inline letr::LetrConfig smallLetr() {
    letr::LetrConfig c;
    c.backbone = "resnet10";
    c.hiddenDim = 16;
    c.nheads = 2;
    c.dimFeedforward = 16;
    c.coarseEncLayers = 1;
    c.coarseDecLayers = 1;
    c.fineEncLayers = 1;
    c.fineDecLayers = 1;
    c.numQueries = 4;
    c.shortSide = 32;
    return c;
}

inline coat::CoatConfig smallCoat() {
    coat::CoatConfig c;
    c.variant = "custom";
    c.embedDims = {8, 8, 8, 8};
    c.serialDepths = {1, 1, 1, 1};
    c.mlpRatios = {1, 1, 1, 1};
    c.numHeads = 2;
    c.crpeWindow = {{3, 1}, {5, 1}};
    c.numClasses = 3;
    c.imageSize = 32;
    c.resize = 32;
    return c;
}

inline constellation::ConstellationConfig smallConstellation() {
    constellation::ConstellationConfig c;
    c.channels = {4, 4, 4, 4};
    c.clusters = 4;
    c.heads = 2;
    c.dropout = 0.0;
    c.numClasses = 3;
    c.imageSize = 16;
    return c;
}

inline efficientzero::Config smallEfficientZero() {
    auto c = efficientzero::Config::grid(2, 4, 4, 3);
    c.channels = 4;
    c.reducedChannelsReward = c.reducedChannelsValue = c.reducedChannelsPolicy = 2;
    c.lstmHidden = 4;
    c.rewardHidden = c.valueHidden = c.policyHidden = {4};
    c.supportSize = 2;
    c.projHidden = c.projOut = c.predHidden = 4;
    return c;
}

} // namespace glimpse::fuzz
