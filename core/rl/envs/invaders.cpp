// invaders: a formation of aliens marches sideways, steps down at the edges (faster as it
// thins out) and drops bombs; the cannon on the bottom row has one shot in flight at a time,
// and shields absorb shots from both sides. Upper rows are worth more. If the formation
// reaches the ground the game is over; a cleared wave is replaced by a lower, faster one.
#include <algorithm>
#include <optional>

#include "core/rl/envs/game.h"

namespace glimpse::rl {
namespace {

constexpr int H = 12, W = 12;
enum Channel { kShield, kAlien, kBomb, kShot, kPlayer };
enum Action { NOOP, FIRE, RIGHT, LEFT, RIGHTFIRE, LEFTFIRE };

bool contains(const std::vector<Pos>& v, Pos p) { return std::find(v.begin(), v.end(), p) != v.end(); }

// One step of the formation: sideways, or down and turn at an edge.
void march(std::vector<Pos>& aliens, int& dx) {
    bool edge = std::any_of(aliens.begin(), aliens.end(), [&](Pos p) { return p.x + dx < 0 || p.x + dx >= W; });
    for (Pos& p : aliens) {
        if (edge) ++p.y;
        else p.x += dx;
    }
    if (edge) dx = -dx;
}

class Invaders final : public Game {
public:
    Invaders()
        : Game("invaders", H, W,
               {{"shield", {90, 90, 110}}, {"alien", {80, 220, 80}}, {"bomb", {240, 70, 60}},
                {"shot", {250, 230, 90}}, {"player", {80, 200, 240}}},
               {"NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"}) {}

    void reset() override {
        lives_ = 3;
        over_ = false;
        wave_ = 0;
        px_ = W / 2;
        shot_.reset();
        bombs_.clear();
        shields_.clear();
        for (int x : {1, 2, 5, 6, 9, 10}) shields_.push_back({H - 3, x});
        newWave();
    }

    float tick(int a) override {
        float reward = 0.f;
        if (a == RIGHT || a == RIGHTFIRE) px_ = std::min(W - 1, px_ + 1);
        if (a == LEFT || a == LEFTFIRE) px_ = std::max(0, px_ - 1);
        if (shot_) --shot_->y;
        else if (a == FIRE || a == RIGHTFIRE || a == LEFTFIRE) shot_ = Pos{H - 2, px_};
        reward += resolveShot();

        for (auto& b : bombs_) ++b.y;
        bombs_.erase(std::remove_if(bombs_.begin(), bombs_.end(), [&](Pos b) {
                         if (shot_ && *shot_ == b) {  // shots collide and cancel
                             shot_.reset();
                             return true;
                         }
                         return b.y >= H || eraseShield(b);
                     }),
                     bombs_.end());
        if (contains(bombs_, {H - 1, px_})) {
            --lives_;
            bombs_.clear();
            shot_.reset();
            px_ = W / 2;
            return reward;
        }

        if (++timer_ >= period()) {
            timer_ = 0;
            march(aliens_, dx_);
            for (Pos p : aliens_) eraseShield(p);
            reward += resolveShot();
            if (std::any_of(aliens_.begin(), aliens_.end(), [](Pos p) { return p.y >= H - 2; })) {
                over_ = true;  // the invasion reached the ground
                return reward;
            }
        }
        if (!aliens_.empty() && bombs_.size() < 3 && chance(0.05 + 0.02 * wave_)) {
            Pos low = aliens_[size_t(randint(int(aliens_.size())))];
            for (Pos p : aliens_)  // the lowest alien of the chosen column drops the bomb
                if (p.x == low.x && p.y > low.y) low = p;
            bombs_.push_back({low.y + 1, low.x});
        }
        if (aliens_.empty()) {
            ++wave_;
            newWave();
        }
        return reward;
    }

    void draw(Frame& f) const override {
        for (Pos s : shields_) f.set(kShield, s);
        for (Pos p : aliens_) f.set(kAlien, p);
        for (Pos b : bombs_) f.set(kBomb, b);
        if (shot_) f.set(kShot, *shot_);
        f.set(kPlayer, {H - 1, px_});
    }

    // Step aside from bombs falling within four rows; fire when a shot from here meets an
    // alien on the formation's march; otherwise walk towards the nearest alien column.
    int scripted() const override {
        auto safe = [&](int x) {
            return std::none_of(bombs_.begin(), bombs_.end(), [&](Pos b) { return b.x == x && b.y >= H - 5; });
        };
        int target = px_, best = 1 << 20;
        for (Pos p : aliens_)
            if (int cost = 4 * std::abs(p.x - px_) - p.y; cost < best) {
                best = cost;
                target = p.x;
            }
        int move = 0, bestScore = 1 << 20;
        for (int m : {0, 1, -1}) {
            int x = std::clamp(px_ + m, 0, W - 1);
            int score = (safe(x) ? 0 : 1000) - (!shot_ && wouldHit(x) ? 100 : 0) + 2 * std::abs(x - target) + (m != 0);
            if (score < bestScore) {
                bestScore = score;
                move = m;
            }
        }
        const bool fire = !shot_ && wouldHit(std::clamp(px_ + move, 0, W - 1));
        if (move > 0) return fire ? RIGHTFIRE : RIGHT;
        if (move < 0) return fire ? LEFTFIRE : LEFT;
        return fire ? FIRE : NOOP;
    }

private:
    int period() const { return std::max(2, 2 + int(aliens_.size()) / 3 - wave_); }

    // Would a shot fired this frame from column x meet an alien? Replays the frame order of
    // tick(): the shot is checked before and after each march step (shields ignored).
    bool wouldHit(int x) const {
        std::vector<Pos> aliens = aliens_;
        int dx = dx_, timer = timer_;
        for (int row = H - 2; row >= 0; --row) {
            if (contains(aliens, {row, x})) return true;
            if (++timer >= period()) {
                timer = 0;
                march(aliens, dx);
                if (contains(aliens, {row, x})) return true;
            }
        }
        return false;
    }

    void newWave() {
        aliens_.clear();
        points_.clear();
        for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 4; ++c) {
                aliens_.push_back({1 + std::min(wave_, 2) + r, 1 + 2 * c});
                points_.push_back(float(3 - r));
            }
        dx_ = 1;
        timer_ = 0;
    }

    bool eraseShield(Pos p) {
        auto it = std::find(shields_.begin(), shields_.end(), p);
        if (it == shields_.end()) return false;
        shields_.erase(it);
        return true;
    }

    float resolveShot() {
        if (!shot_) return 0.f;
        if (shot_->y < 0 || eraseShield(*shot_)) {
            shot_.reset();
            return 0.f;
        }
        auto it = std::find(aliens_.begin(), aliens_.end(), *shot_);
        if (it == aliens_.end()) return 0.f;
        const auto i = it - aliens_.begin();
        const float points = points_[size_t(i)];
        aliens_.erase(it);
        points_.erase(points_.begin() + i);
        shot_.reset();
        return points;
    }

    int wave_ = 0, px_ = 0, dx_ = 1, timer_ = 0;
    std::optional<Pos> shot_;
    std::vector<Pos> bombs_, shields_, aliens_;
    std::vector<float> points_;  // per alien: 3, 2, 1 by its row in the formation
};

} // namespace

std::unique_ptr<Game> makeInvaders() { return std::make_unique<Invaders>(); }

} // namespace glimpse::rl
