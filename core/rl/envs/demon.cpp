// demon: waves of demons drift and jitter in the upper half, fire down at the player and now
// and then swoop down at the player's column. The player's laser travels three cells a frame.
#include <algorithm>
#include <optional>

#include "core/rl/envs/game.h"

namespace glimpse::rl {
namespace {

constexpr int H = 12, W = 12, kWaveSize = 6, kMaxOnScreen = 3, kLaser = 3;

// One sideways step, turning at the walls (dx is updated).
int drift(int x, int& dx) {
    if (x + dx < 0 || x + dx >= W) dx = -dx;
    return x + dx;
}
enum Channel { kDemon, kDemonShot, kShot, kPlayer };
enum Action { NOOP, FIRE, RIGHT, LEFT };

class Demon final : public Game {
public:
    Demon()
        : Game("demon", H, W,
               {{"demon", {230, 80, 220}}, {"demon_shot", {240, 70, 60}}, {"shot", {250, 230, 90}},
                {"player", {80, 200, 240}}},
               {"NOOP", "FIRE", "RIGHT", "LEFT"}) {}

    void reset() override {
        lives_ = 3;
        over_ = false;
        wave_ = 0;
        frame_ = 0;
        px_ = W / 2;
        startWave();
    }

    float tick(int a) override {
        ++frame_;
        if (a == RIGHT) px_ = std::min(W - 1, px_ + 1);
        if (a == LEFT) px_ = std::max(0, px_ - 1);
        float reward = 0.f;
        if (shot_) {  // the laser moves kLaser cells, checking each
            for (int k = 0; k < kLaser && shot_; ++k) {
                --shot_->y;
                reward += resolveShot();
            }
        } else if (a == FIRE) {
            shot_ = Pos{H - 2, px_};
            reward += resolveShot();
        }

        for (auto& d : demons_) {
            if (d.diving) {
                ++d.p.y;
                if (frame_ % 2 == 0) d.p.x += (px_ > d.p.x) - (px_ < d.p.x);
                continue;
            }
            if (frame_ % 2 == 0) {  // drift every other frame, now and then turning
                if (chance(0.15)) d.dx = -d.dx;
                d.p.x = drift(d.p.x, d.dx);
            }
            if (chance(0.1)) d.p.y = std::clamp(d.p.y + (chance(0.5) ? 1 : -1), 1, 5);
            if (chance(0.004 + 0.004 * wave_)) d.diving = true;
            else if (shots_.size() < 6 && chance(0.05 + 0.01 * wave_)) shots_.push_back({d.p.y + 1, d.p.x});
        }
        reward += resolveShot();

        for (auto& s : shots_) ++s.y;
        bool hit = false;
        shots_.erase(std::remove_if(shots_.begin(), shots_.end(), [&](Pos s) {
                         hit |= s == Pos{H - 1, px_};
                         return s.y >= H;
                     }),
                     shots_.end());
        demons_.erase(std::remove_if(demons_.begin(), demons_.end(), [&](const Body& d) {
                          if (d.p.y < H - 1) return false;
                          hit |= d.p.x == px_;
                          --spawned_;  // a demon that dived past comes back later
                          return true;
                      }),
                      demons_.end());
        if (hit) {
            --lives_;
            shots_.clear();
            shot_.reset();
            for (auto& d : demons_) {
                d.diving = false;
                d.p.y = std::min(d.p.y, 5);
            }
            return reward;
        }

        if (int(demons_.size()) < kMaxOnScreen && spawned_ < kWaveSize && --spawnTimer_ <= 0) {
            demons_.push_back({{1 + randint(2), randint(W)}, chance(0.5) ? 1 : -1, false});
            ++spawned_;
            spawnTimer_ = 6;
        }
        if (killed_ >= kWaveSize) {
            ++wave_;
            startWave();
        }
        return reward;
    }

    void draw(Frame& f) const override {
        for (const auto& d : demons_) f.set(kDemon, d.p);
        for (Pos s : shots_) f.set(kDemonShot, s);
        if (shot_) f.set(kShot, *shot_);
        f.set(kPlayer, {H - 1, px_});
    }

    // Dodge shots and divers close above; fire when a demon will be over the player by the time
    // the laser reaches its row (drift replayed without the random turns); otherwise walk
    // towards the nearest such meeting column.
    int scripted() const override {
        auto danger = [&](int x) {
            for (Pos s : shots_)
                if (s.x == x && s.y >= H - 4) return true;
            for (const auto& d : demons_)
                if (d.diving && std::abs(d.p.x - x) <= 1 && d.p.y >= H - 5) return true;
            return false;
        };
        int target = px_, best = 1 << 20;
        for (const auto& d : demons_) {
            if (d.diving) continue;
            const int64_t frames = (H - 2 - d.p.y + kLaser - 1) / kLaser;
            int x = d.p.x, dx = d.dx;
            for (int64_t f = frame_ + 1; f <= frame_ + frames; ++f)
                if (f % 2 == 0) x = drift(x, dx);
            if (std::abs(x - px_) < best) {
                best = std::abs(x - px_);
                target = x;
            }
        }
        if (!shot_ && best == 0 && !danger(px_)) return FIRE;
        int move = 0, bestScore = 1 << 20;
        for (int m : {0, 1, -1}) {
            int x = std::clamp(px_ + m, 0, W - 1);
            int score = (danger(x) ? 1000 : 0) + 2 * std::abs(x - target) + (m != 0);
            if (score < bestScore) {
                bestScore = score;
                move = m;
            }
        }
        return move > 0 ? RIGHT : move < 0 ? LEFT : NOOP;
    }

private:
    struct Body {
        Pos p;
        int dx;
        bool diving;
    };

    void startWave() {
        demons_.clear();
        shots_.clear();
        shot_.reset();
        spawned_ = killed_ = 0;
        spawnTimer_ = 3;
    }

    float resolveShot() {
        if (!shot_) return 0.f;
        if (shot_->y < 0) {
            shot_.reset();
            return 0.f;
        }
        auto it = std::find_if(demons_.begin(), demons_.end(), [&](const Body& d) { return d.p == *shot_; });
        if (it == demons_.end()) return 0.f;
        demons_.erase(it);
        shot_.reset();
        ++killed_;
        return 1.f + 0.5f * float(std::min(wave_, 4));
    }

    int wave_ = 0, px_ = 0, spawned_ = 0, killed_ = 0, spawnTimer_ = 0;
    int64_t frame_ = 0;
    std::optional<Pos> shot_;
    std::vector<Pos> shots_;
    std::vector<Body> demons_;
};

} // namespace

std::unique_ptr<Game> makeDemon() { return std::make_unique<Demon>(); }

} // namespace glimpse::rl
