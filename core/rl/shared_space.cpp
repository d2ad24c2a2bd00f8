#include "core/rl/shared_space.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace glimpse::rl {

bool isSharedName(const std::string& env) { return env.rfind(kSharedPrefix, 0) == 0; }

std::string baseGameName(const std::string& env) {
    return isSharedName(env) ? env.substr(std::string(kSharedPrefix).size()) : env;
}

const std::vector<std::string>& sharedActionNames() {
    static const std::vector<std::string> names = {"NOOP", "FIRE",     "UP",       "RIGHT", "LEFT",
                                                   "DOWN", "RIGHTFIRE", "LEFTFIRE", "JUMP"};
    return names;
}

int sharedActionCount() { return int(sharedActionNames().size()); }

ObsShape sharedObservationShape() { return {3, 15, 15}; }

ActionMap ActionMap::fromNames(const std::string& game, const std::vector<std::string>& names) {
    const auto& shared = sharedActionNames();
    ActionMap m;
    m.game = game;
    m.toNative.assign(shared.size(), -1);
    for (size_t a = 0; a < names.size(); ++a) {
        const auto it = std::find(shared.begin(), shared.end(), names[a]);
        if (it == shared.end())
            throw Error("shared action space: action '" + names[a] + "' of '" + game + "' is not among its " +
                        std::to_string(shared.size()) + " actions");
        const int id = int(it - shared.begin());
        if (m.toNative[size_t(id)] >= 0) throw Error("shared action space: '" + game + "' names action '" + names[a] + "' twice");
        m.toShared.push_back(id);
        m.toNative[size_t(id)] = int(a);
    }
    m.legal = m.toShared;
    std::sort(m.legal.begin(), m.legal.end());
    return m;
}

std::vector<float> ActionMap::policyToShared(const float* native) const {
    std::vector<float> out(size_t(sharedActionCount()), 0.f);
    for (size_t a = 0; a < toShared.size(); ++a) out[size_t(toShared[a])] = native[a];
    return out;
}

ActionMap actionMap(const std::string& game) {
    const std::string base = baseGameName(game);
    return ActionMap::fromNames(base, makeEnv(base)->actionNames());
}

namespace {

template <typename T>
void drawShared(const std::vector<Colour>& colours, const T* native, const ObsShape& s, float scale, float* dst) {
    const ObsShape out = sharedObservationShape();
    if (int(colours.size()) != s.channels)
        throw Error("shared space: " + std::to_string(colours.size()) + " colours for " + std::to_string(s.channels) + " channels");
    if (s.height > out.height || s.width > out.width || s.height < 1 || s.width < 1)
        throw Error("shared space: a " + std::to_string(s.height) + "x" + std::to_string(s.width) + " frame does not fit the " +
                    std::to_string(out.height) + "x" + std::to_string(out.width) + " canvas");
    std::fill(dst, dst + out.numel(), 0.f);
    const int64_t plane = int64_t(out.height) * out.width;
    for (int y = 0; y < s.height; ++y)
        for (int x = 0; x < s.width; ++x) {
            float rgb[3] = {0.f, 0.f, 0.f};
            for (int c = 0; c < s.channels; ++c) {
                const float v = std::min(1.f, float(native[(int64_t(c) * s.height + y) * s.width + x]) * scale);
                if (v <= 0.f) continue;
                for (int k = 0; k < 3; ++k) rgb[k] = rgb[k] * (1.f - v) + float(colours[size_t(c)][size_t(k)]) / 255.f * v;
            }
            for (int k = 0; k < 3; ++k) dst[k * plane + int64_t(y) * out.width + x] = rgb[k];
        }
}

// A built-in game seen through the shared space.
class SharedEnv final : public Env {
public:
    SharedEnv(std::unique_ptr<Env> inner)
        : inner_(std::move(inner)), map_(ActionMap::fromNames(inner_->name(), inner_->actionNames())),
          colours_(inner_->channelColours()), shape_(inner_->observationShape()), native_(size_t(shape_.numel())) {}

    std::string name() const override { return kSharedPrefix + inner_->name(); }
    void reset(uint64_t seed) override { inner_->reset(seed); }
    StepResult step(int action) override {
        if (action < 0 || action >= sharedActionCount())
            throw Error("rl: action " + std::to_string(action) + " is out of range for '" + name() + "', which has " +
                        std::to_string(sharedActionCount()) + " actions");
        const int native = map_.toNative[size_t(action)];
        if (native < 0)
            throw Error("rl: action " + sharedActionNames()[size_t(action)] + " is not legal in '" + inner_->name() + "'");
        return inner_->step(native);
    }
    int numActions() const override { return sharedActionCount(); }
    std::vector<int> legalActions() const override { return map_.legal; }
    std::vector<std::string> actionNames() const override { return sharedActionNames(); }
    ObsShape observationShape() const override { return sharedObservationShape(); }
    std::vector<std::string> channelNames() const override { return {"red", "green", "blue"}; }
    std::vector<std::array<uint8_t, 3>> channelColours() const override { return {{{255, 0, 0}}, {{0, 255, 0}}, {{0, 0, 255}}}; }
    void observationInto(float* dst) const override {
        inner_->observationInto(native_.data());
        sharedFrameInto(colours_, native_.data(), shape_, dst);
    }
    cv::Mat render(int scale) const override { return inner_->render(scale); }
    int lives() const override { return inner_->lives(); }
    int episodeSteps() const override { return inner_->episodeSteps(); }
    bool episodeOver() const override { return inner_->episodeOver(); }
    const EnvOptions& options() const override { return inner_->options(); }
    int referenceAction() const override { return map_.toShared.at(size_t(inner_->referenceAction())); }

private:
    std::unique_ptr<Env> inner_;
    ActionMap map_;
    std::vector<Colour> colours_;
    ObsShape shape_;
    mutable std::vector<float> native_;
};

} // namespace

void sharedFrameInto(const std::vector<Colour>& colours, const float* native, const ObsShape& shape, float* dst) {
    drawShared(colours, native, shape, 1.f, dst);
}

void sharedFrameInto(const std::vector<Colour>& colours, const uint8_t* native, const ObsShape& shape, float* dst) {
    drawShared(colours, native, shape, 1.f / 255.f, dst);
}

std::unique_ptr<Env> makeSharedEnv(const std::string& game, const EnvOptions& options) {
    if (isSharedName(game)) throw Error("rl: '" + game + "' is already in the shared space");
    return std::make_unique<SharedEnv>(makeEnv(game, options));
}

} // namespace glimpse::rl
