#include "core/rl/env.h"

#include <cstring>
#include <random>

#include "core/error.h"
#include "core/rl/envs/game.h"
#include "core/rl/shared_space.h"

namespace glimpse::rl {

std::vector<float> Env::observation() const {
    std::vector<float> obs(size_t(observationShape().numel()));
    observationInto(obs.data());
    return obs;
}

int Env::referenceAction() const {
    throw Error("rl: environment '" + name() + "' has no scripted reference policy");
}

namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A Game with the ALE-style wrapper: sticky actions, frame skip, episode step limit.
class ArcadeEnv final : public Env {
public:
    ArcadeEnv(std::unique_ptr<Game> game, const EnvOptions& options)
        : game_(std::move(game)), options_(options) {
        reset(0);
    }

    std::string name() const override { return game_->name(); }
    int numActions() const override { return int(game_->actions().size()); }
    std::vector<std::string> actionNames() const override { return game_->actions(); }
    std::vector<int> legalActions() const override {
        std::vector<int> all(static_cast<size_t>(numActions()));
        for (int a = 0; a < numActions(); ++a) all[size_t(a)] = a;
        return all;
    }
    ObsShape observationShape() const override {
        return {int(game_->channels().size()), game_->height(), game_->width()};
    }
    std::vector<std::string> channelNames() const override {
        std::vector<std::string> names;
        for (const auto& c : game_->channels()) names.push_back(c.name);
        return names;
    }
    std::vector<std::array<uint8_t, 3>> channelColours() const override {
        std::vector<std::array<uint8_t, 3>> colours;
        for (const auto& c : game_->channels()) colours.push_back({c.color.r, c.color.g, c.color.b});
        return colours;
    }
    int lives() const override { return game_->lives(); }
    int episodeSteps() const override { return steps_; }
    bool episodeOver() const override { return done_; }
    const EnvOptions& options() const override { return options_; }
    int referenceAction() const override { return game_->scripted(); }

    void reset(uint64_t seed) override {
        game_->rng.seed(splitmix64(seed));
        stickyRng_.seed(splitmix64(seed ^ 0x5f1c4e37a2d9b861ull));
        game_->reset();
        steps_ = 0;
        previous_ = 0;
        done_ = false;
    }

    StepResult step(int action) override {
        if (action < 0 || action >= numActions())
            throw Error("rl: action " + std::to_string(action) + " is out of range for '" + name() +
                        "', which has " + std::to_string(numActions()) + " actions");
        if (done_) throw Error("rl: step() on '" + name() + "' after its episode ended; call reset()");
        StepResult r;
        for (int f = 0; f < options_.frameSkip; ++f) {
            int a = action;
            if (options_.stickyActionProb > 0.f &&
                double(stickyRng_() >> 11) * 0x1.0p-53 < options_.stickyActionProb)
                a = previous_;
            previous_ = a;
            r.reward += game_->tick(a);
            if (game_->over()) {
                r.terminal = true;
                break;
            }
        }
        ++steps_;
        r.truncated = !r.terminal && options_.maxEpisodeSteps > 0 && steps_ >= options_.maxEpisodeSteps;
        r.lives = game_->lives();
        done_ = r.done();
        return r;
    }

    void observationInto(float* dst) const override {
        Frame f(int(game_->channels().size()), game_->height(), game_->width());
        game_->draw(f);
        std::memcpy(dst, f.data.data(), f.data.size() * sizeof(float));
    }

    cv::Mat render(int scale) const override {
        if (scale < 1) throw Error("rl: render scale must be >= 1, got " + std::to_string(scale));
        Frame f(int(game_->channels().size()), game_->height(), game_->width());
        game_->draw(f);
        const cv::Vec3f background(18, 18, 28);
        cv::Mat img(f.H * scale, f.W * scale, CV_8UC3);
        for (int y = 0; y < f.H; ++y)
            for (int x = 0; x < f.W; ++x) {
                cv::Vec3f colour = background;
                for (int c = 0; c < f.C; ++c) {
                    float v = std::min(1.f, f.at(c, y, x));
                    if (v <= 0.f) continue;
                    Rgb k = game_->channels()[size_t(c)].color;
                    colour = colour * (1.f - v) + cv::Vec3f(k.r, k.g, k.b) * v;
                }
                img(cv::Rect(x * scale, y * scale, scale, scale)) =
                    cv::Scalar(colour[0], colour[1], colour[2]);
            }
        return img;
    }

private:
    std::unique_ptr<Game> game_;
    EnvOptions options_;
    std::mt19937_64 stickyRng_;
    int steps_ = 0;
    int previous_ = 0;
    bool done_ = false;
};

struct Registered {
    GameInfo info;
    std::unique_ptr<Game> (*make)();
};

const std::vector<Registered>& registry() {
    static const std::vector<Registered> games = {
        {{"invaders", "shooter", "rows of aliens march and descend while firing; shoot them from below"}, makeInvaders},
        {{"demon", "shooter", "waves of demons drift, swoop and fire; shoot them before they dive into you"}, makeDemon},
        {{"sub", "shooter", "submarine: torpedo fish, pick up divers, surface with them before oxygen runs out"}, makeSub},
        {{"breakout", "shooter", "paddle and ball against a wall of bricks"}, makeBreakout},
        {{"pellets", "maze", "eat pellets while ghosts chase you; power pellets make ghosts edible"}, makePellets},
        {{"heist", "maze", "rob banks in a city maze, outrun police, drop dynamite, mind the fuel"}, makeHeist},
        {{"alien", "maze", "collect eggs in corridors while aliens hunt you; a flamethrower drives them back"}, makeAlien},
        {{"painter", "maze", "paint every edge of a lattice while tracers patrol it; jump over them"}, makePainter},
    };
    return games;
}

} // namespace

const std::vector<GameInfo>& arcadeGames() {
    static const std::vector<GameInfo> infos = [] {
        std::vector<GameInfo> v;
        for (const auto& r : registry()) v.push_back(r.info);
        return v;
    }();
    return infos;
}

std::vector<std::string> envNames() {
    std::vector<std::string> names;
    for (const auto& g : arcadeGames()) names.push_back(g.name);
    return names;
}

bool isKnownEnv(const std::string& name) {
    const std::string base = baseGameName(name);
    for (const auto& g : arcadeGames())
        if (g.name == base) return true;
    return false;
}

std::unique_ptr<Env> makeEnv(const std::string& name, const EnvOptions& options) {
    if (isSharedName(name)) return makeSharedEnv(baseGameName(name), options);
    if (options.frameSkip < 1)
        throw Error("rl: frameSkip must be >= 1, got " + std::to_string(options.frameSkip));
    if (options.maxEpisodeSteps < 0)
        throw Error("rl: maxEpisodeSteps must be >= 0 (0 = no limit), got " +
                    std::to_string(options.maxEpisodeSteps));
    if (!(options.stickyActionProb >= 0.f && options.stickyActionProb < 1.f))
        throw Error("rl: stickyActionProb must be in [0, 1), got " + std::to_string(options.stickyActionProb));
    for (const auto& r : registry())
        if (r.info.name == name) return std::make_unique<ArcadeEnv>(r.make(), options);
    std::string valid;
    for (const auto& n : envNames()) valid += (valid.empty() ? "" : ", ") + n;
    throw Error("rl: unknown game '" + name + "'; valid names: " + valid + " (each also as shared:NAME)");
}

uint64_t episodeSeed(uint64_t seed, int index, int64_t episode) {
    return splitmix64(splitmix64(seed + 0x632BE59BD9B4E019ull * uint64_t(index + 1)) + uint64_t(episode));
}

VecEnv::VecEnv(const std::string& game, int numEnvs, uint64_t seed, const EnvOptions& options,
               int frameStack)
    : seed_(seed), stack_(frameStack) {
    if (numEnvs < 1) throw Error("rl: VecEnv needs at least one environment, got " + std::to_string(numEnvs));
    if (frameStack < 1) throw Error("rl: frameStack must be >= 1, got " + std::to_string(frameStack));
    for (int i = 0; i < numEnvs; ++i) envs_.push_back(makeEnv(game, options));
    episodes_.assign(size_t(numEnvs), 0);
    returns_.assign(size_t(numEnvs), 0.0);
    history_.assign(size_t(numEnvs), std::vector<float>(size_t(stack_ * frameShape().numel())));
    for (int i = 0; i < numEnvs; ++i) resetEnv(i);
}

ObsShape VecEnv::stackedShape() const {
    ObsShape s = frameShape();
    return {s.channels * stack_, s.height, s.width};
}

void VecEnv::resetEnv(int i) {
    envs_[size_t(i)]->reset(episodeSeed(seed_, i, episodes_[size_t(i)]));
    returns_[size_t(i)] = 0.0;
    pushFrame(i, true);
}

void VecEnv::pushFrame(int i, bool fill) {
    auto& h = history_[size_t(i)];
    const size_t n = size_t(frameShape().numel());
    if (fill) {
        envs_[size_t(i)]->observationInto(h.data());
        for (int k = 1; k < stack_; ++k) std::memcpy(h.data() + k * n, h.data(), n * sizeof(float));
    } else {
        std::memmove(h.data(), h.data() + n, (h.size() - n) * sizeof(float));
        envs_[size_t(i)]->observationInto(h.data() + h.size() - n);
    }
}

std::vector<float> VecEnv::observations() const {
    std::vector<float> out(size_t(size()) * size_t(stackedShape().numel()));
    observationsInto(out.data());
    return out;
}

void VecEnv::observationsInto(float* dst) const {
    for (const auto& h : history_) {
        std::memcpy(dst, h.data(), h.size() * sizeof(float));
        dst += h.size();
    }
}

std::vector<VecStep> VecEnv::step(const std::vector<int>& actions) {
    if (int(actions.size()) != size())
        throw Error("rl: VecEnv::step got " + std::to_string(actions.size()) + " actions for " +
                    std::to_string(size()) + " environments");
    std::vector<VecStep> out(actions.size());
    for (int i = 0; i < size(); ++i) {
        Env& e = *envs_[size_t(i)];
        VecStep& s = out[size_t(i)];
        s.result = e.step(actions[size_t(i)]);
        returns_[size_t(i)] += s.result.reward;
        if (s.result.done()) {
            s.reset = true;
            s.episodeReturn = returns_[size_t(i)];
            s.episodeLength = e.episodeSteps();
            ++episodes_[size_t(i)];
            resetEnv(i);
        } else {
            pushFrame(i, false);
        }
    }
    return out;
}

} // namespace glimpse::rl
