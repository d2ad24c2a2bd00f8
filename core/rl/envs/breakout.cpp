// breakout: a three-cell paddle on the bottom row keeps a diagonally moving ball in play; the
// ball knocks out bricks (upper rows are worth more). FIRE serves the ball, and so does the game
// itself after kAutoServe frames without one (as agents press FIRE after a reset or a lost life);
// a cleared wall is rebuilt.
#include <algorithm>

#include "core/rl/envs/game.h"

namespace glimpse::rl {
namespace {

constexpr int H = 14, W = 12, kPaddle = 3, kTopBrick = 2, kBrickRows = 4;
// Frames out of play after which the ball is served without FIRE: a policy that never presses
// FIRE still plays instead of idling safely until the episode's step limit.
constexpr int kAutoServe = 5;
enum Channel { kBrick, kBall, kPaddleCh };
enum Action { NOOP, FIRE, RIGHT, LEFT };

class Breakout final : public Game {
public:
    Breakout()
        : Game("breakout", H, W, {{"brick", {230, 130, 50}}, {"ball", {240, 60, 60}}, {"paddle", {220, 220, 230}}},
               {"NOOP", "FIRE", "RIGHT", "LEFT"}) {}

    void reset() override {
        lives_ = 5;
        over_ = false;
        px_ = (W - kPaddle) / 2;
        inPlay_ = false;
        idle_ = 0;
        buildWall();
    }

    float tick(int a) override {
        if (a == RIGHT) px_ = std::min(W - kPaddle, px_ + 1);
        if (a == LEFT) px_ = std::max(0, px_ - 1);
        if (!inPlay_) {
            if (a == FIRE || ++idle_ >= kAutoServe) {
                idle_ = 0;
                ball_ = {kTopBrick + kBrickRows + 2, 2 + randint(W - 4)};
                dy_ = 1;
                dx_ = chance(0.5) ? 1 : -1;
                inPlay_ = true;
            }
            return 0.f;
        }
        float reward = 0.f;
        for (int tries = 0; tries < 4; ++tries) {  // reflect until the next cell is free
            Pos n{ball_.y + dy_, ball_.x + dx_};
            if (n.x < 0 || n.x >= W) {
                dx_ = -dx_;
            } else if (n.y < 0) {
                dy_ = -dy_;
            } else if (n.y == H - 1) {
                if (n.x < px_ || n.x >= px_ + kPaddle) {  // missed
                    --lives_;
                    inPlay_ = false;
                    return reward;
                }
                dy_ = -1;  // the paddle's outer cells send the ball outwards
                if (n.x == px_) dx_ = -1;
                if (n.x == px_ + kPaddle - 1) dx_ = 1;
            } else if (brick(n.y, ball_.x)) {
                reward += knock(n.y, ball_.x);
                dy_ = -dy_;
            } else if (brick(ball_.y, n.x)) {
                reward += knock(ball_.y, n.x);
                dx_ = -dx_;
            } else if (brick(n.y, n.x)) {
                reward += knock(n.y, n.x);
                dy_ = -dy_;
            } else {
                ball_ = n;
                break;
            }
        }
        if (std::none_of(bricks_.begin(), bricks_.end(), [](uint8_t b) { return b != 0; })) {
            buildWall();
            inPlay_ = false;
        }
        return reward;
    }

    void draw(Frame& f) const override {
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x)
                if (brick(y, x)) f.set(kBrick, {y, x});
        for (int k = 0; k < kPaddle; ++k) f.set(kPaddleCh, {H - 1, px_ + k});
        if (inPlay_) f.set(kBall, ball_);
    }

    // Serve; then move the paddle's centre under the column where the ball will reach the
    // bottom (walls reflected, bricks ignored), or follow the ball while it rises.
    int scripted() const override {
        if (!inPlay_) return FIRE;
        int target = ball_.x;
        if (dy_ > 0) {
            const int period = 2 * (W - 1);
            int x = ((ball_.x + dx_ * (H - 1 - ball_.y)) % period + period) % period;
            target = x < W ? x : period - x;
        }
        int centre = px_ + kPaddle / 2;
        if (target > centre && px_ < W - kPaddle) return RIGHT;
        if (target < centre && px_ > 0) return LEFT;
        return NOOP;
    }

private:
    bool brick(int y, int x) const { return y >= 0 && y < H && bricks_[size_t(y * W + x)] != 0; }
    float knock(int y, int x) {
        bricks_[size_t(y * W + x)] = 0;
        return float(kTopBrick + kBrickRows - y);  // 4, 3, 2, 1 from the top row down
    }
    void buildWall() {
        bricks_.assign(size_t(H * W), 0);
        for (int y = kTopBrick; y < kTopBrick + kBrickRows; ++y)
            for (int x = 0; x < W; ++x) bricks_[size_t(y * W + x)] = 1;
    }

    int px_ = 0, dy_ = 1, dx_ = 1;
    int idle_ = 0;  // steps out of play since the last serve, the reset or the lost ball (0 in play)
    bool inPlay_ = false;
    Pos ball_;
    std::vector<uint8_t> bricks_;
};

} // namespace

std::unique_ptr<Game> makeBreakout() { return std::make_unique<Breakout>(); }

} // namespace glimpse::rl
