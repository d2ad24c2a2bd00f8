// sub: a submarine below the surface torpedoes fish that cross the lanes, picks up divers and
// brings them to the surface, where the oxygen tank also refills. Row 0 is the status bar:
// the oxygen gauge from the left, the divers on board from the right.
#include <algorithm>
#include <optional>

#include "core/rl/envs/game.h"

namespace glimpse::rl {
namespace {

constexpr int H = 12, W = 14, kSurface = 1, kMaxOxygen = 60, kMaxDivers = 6;
constexpr int kLanes[] = {3, 5, 7, 9, 11};
enum Channel { kOxygen, kDiver, kFish, kTorpedo, kSub };
enum Action { NOOP, FIRE, UP, RIGHT, LEFT, DOWN, RIGHTFIRE, LEFTFIRE };
constexpr int kMoveAction[4] = {UP, RIGHT, LEFT, DOWN};

class Sub final : public Game {
public:
    Sub()
        : Game("sub", H, W,
               {{"oxygen", {70, 130, 240}}, {"diver", {120, 240, 200}}, {"fish", {240, 90, 70}},
                {"torpedo", {250, 250, 250}}, {"sub", {250, 220, 60}}},
               {"NOOP", "FIRE", "UP", "RIGHT", "LEFT", "DOWN", "RIGHTFIRE", "LEFTFIRE"}) {}

    void reset() override {
        lives_ = 3;
        over_ = false;
        kills_ = 0;
        restart();
    }

    float tick(int a) override {
        float reward = 0.f;
        if (a == UP) p_.y = std::max(kSurface, p_.y - 1);
        if (a == DOWN) p_.y = std::min(H - 1, p_.y + 1);
        if (a == RIGHT || a == RIGHTFIRE) facing_ = 1;
        if (a == LEFT || a == LEFTFIRE) facing_ = -1;
        if (a == RIGHT || a == LEFT) p_.x = std::clamp(p_.x + facing_, 0, W - 1);
        if ((a == FIRE || a == RIGHTFIRE || a == LEFTFIRE) && !torpedo_ && p_.y > kSurface)
            torpedo_ = Mover{p_, facing_, 1, 0};
        for (int k = 0; k < 2 && torpedo_; ++k) {  // torpedoes run two cells a frame
            torpedo_->p.x += torpedo_->dir;
            reward += resolveTorpedo();
        }
        for (auto* group : {&fish_, &divers_})
            for (auto& m : *group)
                if (++m.timer >= m.period) {
                    m.timer = 0;
                    m.p.x += m.dir;
                }
        reward += resolveTorpedo();
        auto gone = [](const Mover& m) { return m.p.x < 0 || m.p.x >= W; };
        fish_.erase(std::remove_if(fish_.begin(), fish_.end(), gone), fish_.end());
        divers_.erase(std::remove_if(divers_.begin(), divers_.end(), [&](const Mover& m) {
                          if (m.p != p_ || carried_ >= kMaxDivers) return gone(m);
                          ++carried_;
                          return true;
                      }),
                      divers_.end());
        if (std::any_of(fish_.begin(), fish_.end(), [&](const Mover& m) { return m.p == p_; })) {
            loseLife();
            return reward;
        }
        if (p_.y == kSurface) {
            reward += 2.f * float(carried_);
            carried_ = 0;
            oxygen_ = std::min(kMaxOxygen, oxygen_ + 6);
        } else if (--oxygen_ <= 0) {
            loseLife();
            return reward;
        }
        spawn(fish_, 6, 0.06 + 0.002 * std::min(kills_, 20), std::max(1, 2 - kills_ / 25));
        spawn(divers_, 2, 0.02, 3);
        return reward;
    }

    void draw(Frame& f) const override {
        for (int x = 0; x < (oxygen_ * W + kMaxOxygen - 1) / kMaxOxygen; ++x) f.set(kOxygen, {0, x});
        for (int i = 0; i < carried_; ++i) f.set(kDiver, {0, W - 1 - i});
        for (const auto& m : divers_) f.set(kDiver, m.p);
        for (const auto& m : fish_) f.set(kFish, m.p);
        if (torpedo_) f.set(kTorpedo, torpedo_->p);
        f.set(kSub, p_);
    }

    // Surface when oxygen runs low or divers are on board; otherwise torpedo a fish in the
    // sub's row, or head for the nearest diver / a safe spot in a fish lane, avoiding fish.
    int scripted() const override {
        auto danger = [&](Pos c) {
            return std::any_of(fish_.begin(), fish_.end(),
                               [&](const Mover& m) { return m.p == c || Pos{m.p.y, m.p.x + m.dir} == c; });
        };
        auto passable = [&](Pos c) { return c.y >= kSurface && !danger(c); };
        auto go = [&](const Passable& goal) {
            int d = bfsFirstStep(H, W, p_, passable, goal);
            if (d >= 0) return kMoveAction[d];
            if (!danger(p_)) return int(NOOP);
            for (int k = 0; k < 4; ++k)
                if (inside(p_ + kDirs[k]) && passable(p_ + kDirs[k])) return kMoveAction[k];
            return int(NOOP);
        };
        if (p_.y == kSurface && oxygen_ < kMaxOxygen) return NOOP;
        if (p_.y > kSurface && (oxygen_ <= p_.y + 6 || carried_ >= 3))
            return go([](Pos c) { return c.y == kSurface; });
        if (!torpedo_ && p_.y > kSurface)
            for (const auto& m : fish_)
                if (m.p.y == p_.y && m.p.x != p_.x) {
                    int side = m.p.x > p_.x ? 1 : -1;
                    return side == facing_ ? FIRE : side > 0 ? RIGHTFIRE : LEFTFIRE;
                }
        if (!divers_.empty())
            return go([&](Pos c) {
                return std::any_of(divers_.begin(), divers_.end(), [&](const Mover& m) { return m.p == c; });
            });
        return go([&](Pos c) {
            return std::any_of(fish_.begin(), fish_.end(),
                               [&](const Mover& m) { return m.p.y == c.y && std::abs(m.p.x - c.x) >= 3; });
        });
    }

private:
    struct Mover {
        Pos p;
        int dir, period, timer;
    };

    void restart() {
        p_ = {kSurface, W / 2};
        facing_ = 1;
        oxygen_ = kMaxOxygen;
        carried_ = 0;
        torpedo_.reset();
        fish_.clear();
        divers_.clear();
    }

    void loseLife() {
        --lives_;
        restart();
    }

    void spawn(std::vector<Mover>& group, size_t most, double p, int period) {
        if (group.size() >= most || !chance(p)) return;
        int lane = kLanes[randint(5)], dir = chance(0.5) ? 1 : -1;
        Pos at{lane, dir > 0 ? 0 : W - 1};
        for (const auto* g : {&fish_, &divers_})
            for (const auto& m : *g)
                if (m.p.y == lane && std::abs(m.p.x - at.x) < 3) return;  // lane entrance busy
        group.push_back({at, dir, period, 0});
    }

    float resolveTorpedo() {
        if (!torpedo_) return 0.f;
        if (torpedo_->p.x < 0 || torpedo_->p.x >= W) {
            torpedo_.reset();
            return 0.f;
        }
        auto it = std::find_if(fish_.begin(), fish_.end(), [&](const Mover& m) { return m.p == torpedo_->p; });
        if (it == fish_.end()) return 0.f;
        fish_.erase(it);
        torpedo_.reset();
        ++kills_;
        return 1.f;
    }

    Pos p_;
    int facing_ = 1, oxygen_ = 0, carried_ = 0, kills_ = 0;
    std::optional<Mover> torpedo_;
    std::vector<Mover> fish_, divers_;
};

} // namespace

std::unique_ptr<Game> makeSub() { return std::make_unique<Sub>(); }

} // namespace glimpse::rl
