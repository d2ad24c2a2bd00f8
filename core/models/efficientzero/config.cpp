#include "core/models/efficientzero/config.h"

#include "core/error.h"

namespace glimpse::efficientzero {

namespace {

// The stem's four stride-2 stages (conv, downsample block, two average pools), each
// k3 p1 s2: n -> (n - 1) / 2 + 1.
int downsampled(int n) {
    for (int i = 0; i < 4; ++i) n = (n - 1) / 2 + 1;
    return n;
}

} // namespace

Config Config::atari(int numActions) {
    Config c;
    c.numActions = numActions;
    c.validate();
    return c;
}

Config Config::grid(int obsChannels, int obsHeight, int obsWidth, int numActions) {
    Config c;
    c.obsChannels = obsChannels;
    c.obsHeight = obsHeight;
    c.obsWidth = obsWidth;
    c.obsScale = 1.f;
    c.numActions = numActions;
    c.downsample = false;
    c.channels = 32;
    c.lstmHidden = 64;
    c.projHidden = 256;
    c.projOut = 256;
    c.predHidden = 128;
    c.validate();
    return c;
}

int Config::stateHeight() const { return downsample ? downsampled(obsHeight) : obsHeight; }
int Config::stateWidth() const { return downsample ? downsampled(obsWidth) : obsWidth; }

void Config::validate() const {
    auto positive = [](int v, const char* name) {
        if (v < 1) throw Error(std::string("efficientzero config: ") + name + " must be >= 1, got " + std::to_string(v));
    };
    positive(obsChannels, "obs_channels");
    positive(obsHeight, "obs_height");
    positive(obsWidth, "obs_width");
    positive(stack, "stack");
    positive(numActions, "num_actions");
    positive(channels, "channels");
    positive(blocks, "blocks");
    positive(downsampleBlocks, "downsample_blocks");
    positive(reducedChannelsReward, "reduced_channels_reward");
    positive(reducedChannelsValue, "reduced_channels_value");
    positive(reducedChannelsPolicy, "reduced_channels_policy");
    positive(lstmHidden, "lstm_hidden");
    positive(supportSize, "support_size");
    positive(projHidden, "proj_hidden");
    positive(projOut, "proj_out");
    positive(predHidden, "pred_hidden");
    if (!(obsScale > 0.f)) throw Error("efficientzero config: obs_scale must be > 0");
    if (downsample && channels % 2 != 0)
        throw Error("efficientzero config: channels must be even with downsample (the stem starts at channels / 2), got " +
                    std::to_string(channels));
    for (const auto* hidden : {&rewardHidden, &valueHidden, &policyHidden})
        for (int h : *hidden) positive(h, "hidden layer size (reward/value/policy_hidden)");
}

nlohmann::json Config::toJson() const {
    return {{"obs_channels", obsChannels},
            {"obs_height", obsHeight},
            {"obs_width", obsWidth},
            {"stack", stack},
            {"obs_scale", obsScale},
            {"num_actions", numActions},
            {"one_hot_actions", oneHotActions},
            {"downsample", downsample},
            {"channels", channels},
            {"blocks", blocks},
            {"downsample_blocks", downsampleBlocks},
            {"reduced_channels_reward", reducedChannelsReward},
            {"reduced_channels_value", reducedChannelsValue},
            {"reduced_channels_policy", reducedChannelsPolicy},
            {"lstm_hidden", lstmHidden},
            {"reward_hidden", rewardHidden},
            {"value_hidden", valueHidden},
            {"policy_hidden", policyHidden},
            {"support_size", supportSize},
            {"proj_hidden", projHidden},
            {"proj_out", projOut},
            {"pred_hidden", predHidden}};
}

Config Config::fromJson(const nlohmann::json& j) {
    if (!j.is_object()) throw Error("efficientzero config: expected a JSON object, got " + std::string(j.type_name()));
    Config c;
    const nlohmann::json defaults = c.toJson();
    for (const auto& [key, value] : j.items()) {
        if (!defaults.contains(key)) {
            std::string valid;
            for (const auto& [k, v] : defaults.items()) valid += (valid.empty() ? "" : ", ") + k;
            throw Error("efficientzero config: unknown key '" + key + "'; valid keys: " + valid);
        }
        const auto& def = defaults.at(key);
        const bool ok = def.is_boolean() ? value.is_boolean()
                        : def.is_array() ? value.is_array()
                        : def.is_number_float() ? value.is_number()
                                                : value.is_number_integer();
        if (!ok)
            throw Error("efficientzero config: '" + key + "' must be " + (def.is_array() ? "an array" : def.type_name()) +
                        ", got " + value.type_name() + " " + value.dump());
    }
    auto get = [&](const char* key, auto& field) {
        if (!j.contains(key)) return;
        try {
            field = j.at(key).get<std::decay_t<decltype(field)>>();
        } catch (const nlohmann::json::exception& e) {
            throw Error(std::string("efficientzero config: '") + key + "': " + e.what());
        }
    };
    get("obs_channels", c.obsChannels);
    get("obs_height", c.obsHeight);
    get("obs_width", c.obsWidth);
    get("stack", c.stack);
    get("obs_scale", c.obsScale);
    get("num_actions", c.numActions);
    get("one_hot_actions", c.oneHotActions);
    get("downsample", c.downsample);
    get("channels", c.channels);
    get("blocks", c.blocks);
    get("downsample_blocks", c.downsampleBlocks);
    get("reduced_channels_reward", c.reducedChannelsReward);
    get("reduced_channels_value", c.reducedChannelsValue);
    get("reduced_channels_policy", c.reducedChannelsPolicy);
    get("lstm_hidden", c.lstmHidden);
    get("reward_hidden", c.rewardHidden);
    get("value_hidden", c.valueHidden);
    get("policy_hidden", c.policyHidden);
    get("support_size", c.supportSize);
    get("proj_hidden", c.projHidden);
    get("proj_out", c.projOut);
    get("pred_hidden", c.predHidden);
    c.validate();
    return c;
}

} // namespace glimpse::efficientzero
