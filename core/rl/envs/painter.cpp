// painter: walk the lines of a 4x4 lattice of boxes and paint them (one point per new cell);
// a box whose twelve edge cells are all painted fills in (five points), a fully painted
// lattice is worth twenty and starts the next, faster level. Tracers patrol the lines (one
// of them steers towards the player); JUMP makes the player untouchable for five frames,
// three jumps per life.
#include <algorithm>

#include "core/rl/envs/game.h"

namespace glimpse::rl {
namespace {

constexpr int N = 13, kGap = 3, kBoxes = (N - 1) / kGap, kJumps = 3, kJumpFrames = 5, kTracers = 4;
constexpr Pos kStart{N - 1, N / 2};
constexpr Pos kTracerStart[kTracers] = {{0, 0}, {0, N - 1}, {0, N / 2}, {N / 2, 0}};
enum Channel { kTrack, kPaint, kFill, kTracer, kPlayer };
enum Action { NOOP, UP, RIGHT, LEFT, DOWN, JUMP };

class Painter final : public Game {
public:
    Painter()
        : Game("painter", N, N,
               {{"track", {70, 70, 90}}, {"paint", {240, 210, 60}}, {"filled_box", {60, 90, 200}},
                {"tracer", {240, 60, 60}}, {"player", {120, 250, 120}}},
               {"NOOP", "UP", "RIGHT", "LEFT", "DOWN", "JUMP"}) {}

    void reset() override {
        lives_ = 3;
        over_ = false;
        frame_ = 0;
        level_ = 0;
        newLevel();
    }

    float tick(int a) override {
        ++frame_;
        float reward = 0.f;
        if (jumpLeft_ > 0) --jumpLeft_;
        if (a == JUMP && jumps_ > 0 && jumpLeft_ == 0) {
            --jumps_;
            jumpLeft_ = kJumpFrames;
        }
        if (a >= UP && a <= DOWN && track(p_ + kDirs[a - UP])) p_ = p_ + kDirs[a - UP];
        reward += paint(p_);
        if (caught()) return reward;

        const bool moves = level_ == 0 ? frame_ % 2 == 0 : frame_ % 3 != 0;
        for (size_t i = 0; moves && i < tracers_.size(); ++i) {
            Tracer& t = tracers_[i];
            std::vector<int> options;
            for (int d = 0; d < 4; ++d)
                if (track(t.p + kDirs[d]) && d != reverseDir(t.dir)) options.push_back(d);
            if (options.empty()) options.push_back(reverseDir(t.dir));
            int pick = options[size_t(randint(int(options.size())))];
            if (i == 0 && chance(0.7))  // the chaser
                for (int d : options)
                    if (manhattan(t.p + kDirs[d], p_) < manhattan(t.p + kDirs[pick], p_)) pick = d;
            t.dir = pick;
            t.p = t.p + kDirs[pick];
        }
        if (caught()) return reward;
        if (std::all_of(painted_.begin(), painted_.end(), [](uint8_t v) { return v != 0; })) {
            reward += 20.f;
            ++level_;
            newLevel();
        }
        return reward;
    }

    void draw(Frame& f) const override {
        for (int y = 0; y < N; ++y)
            for (int x = 0; x < N; ++x) {
                Pos c{y, x};
                if (track(c)) f.set(painted_[size_t(idx(c))] ? kPaint : kTrack, c);
                else if (filled_[size_t((y / kGap) * kBoxes + x / kGap)]) f.set(kFill, c);
            }
        for (const auto& t : tracers_) f.set(kTracer, t.p);
        f.set(kPlayer, p_);
    }

    // Jump when a tracer is next to the player; otherwise the shortest path along the lines to
    // the nearest unpainted cell through cells more than two steps from every tracer, or the
    // move that gets furthest from them.
    int scripted() const override {
        std::vector<Pos> ts;
        for (const auto& t : tracers_) ts.push_back(t.p);
        const auto onTrack = [&](Pos c) { return track(c); };
        const std::vector<int> dist = bfsDistances(N, N, ts, onTrack);
        if (jumpLeft_ == 0 && jumps_ > 0 && dist[size_t(idx(p_))] <= 1) return JUMP;
        auto safe = [&](Pos c) { return track(c) && (jumpLeft_ > 2 || dist[size_t(idx(c))] > 2); };
        int d = bfsFirstStep(N, N, p_, safe, [&](Pos c) { return painted_[size_t(idx(c))] == 0; });
        if (d >= 0) return UP + d;
        int best = NOOP, bestDist = dist[size_t(idx(p_))];
        for (int k = 0; k < 4; ++k) {
            Pos n = p_ + kDirs[k];
            if (track(n) && dist[size_t(idx(n))] > bestDist) {
                bestDist = dist[size_t(idx(n))];
                best = UP + k;
            }
        }
        return best;
    }

private:
    struct Tracer {
        Pos p;
        int dir;
    };

    bool track(Pos c) const { return inside(c) && (c.y % kGap == 0 || c.x % kGap == 0); }

    void newLevel() {
        // Non-track cells count as painted so that "all painted" means every track cell is.
        painted_.assign(size_t(N * N), 0);
        for (int y = 0; y < N; ++y)
            for (int x = 0; x < N; ++x)
                if (!track({y, x})) painted_[size_t(y * N + x)] = 1;
        filled_.assign(size_t(kBoxes * kBoxes), 0);
        restart();
        paint(p_);
    }

    void restart() {
        p_ = kStart;
        jumps_ = kJumps;
        jumpLeft_ = 0;
        tracers_.clear();
        for (int i = 0; i < kTracers; ++i) tracers_.push_back({kTracerStart[i], randint(4)});
    }

    float paint(Pos c) {
        if (painted_[size_t(idx(c))]) return 0.f;
        painted_[size_t(idx(c))] = 1;
        float reward = 1.f;
        for (int by = std::max(0, (c.y - 1) / kGap); by <= std::min(kBoxes - 1, c.y / kGap); ++by)
            for (int bx = std::max(0, (c.x - 1) / kGap); bx <= std::min(kBoxes - 1, c.x / kGap); ++bx) {
                bool done = true;
                for (int k = 0; k <= kGap; ++k)
                    for (Pos e : {Pos{by * kGap, bx * kGap + k}, Pos{by * kGap + kGap, bx * kGap + k},
                                  Pos{by * kGap + k, bx * kGap}, Pos{by * kGap + k, bx * kGap + kGap}})
                        done = done && painted_[size_t(idx(e))];
                uint8_t& fill = filled_[size_t(by * kBoxes + bx)];
                if (done && !fill) {
                    fill = 1;
                    reward += 5.f;
                }
            }
        return reward;
    }

    bool caught() {
        if (jumpLeft_ > 0 ||
            std::none_of(tracers_.begin(), tracers_.end(), [&](const Tracer& t) { return t.p == p_; }))
            return false;
        --lives_;
        restart();
        return true;
    }

    std::vector<uint8_t> painted_, filled_;
    Pos p_;
    int jumps_ = 0, jumpLeft_ = 0, level_ = 0;
    int64_t frame_ = 0;
    std::vector<Tracer> tracers_;
};

} // namespace

std::unique_ptr<Game> makePainter() { return std::make_unique<Painter>(); }

} // namespace glimpse::rl
