// pellets: eat every pellet of the maze while three ghosts chase by simple targeting rules
// (one aims at the player, one ahead of the player, one half at random). A power pellet
// makes the ghosts edible for a while. Ghosts move two frames in three, scared ones one in two.
#include <algorithm>

#include "core/rl/envs/game.h"

namespace glimpse::rl {
namespace {

const std::vector<std::string> kMaze = {
    "###############",
    "#o...........o#",
    "#.##.##.##.##.#",
    "#.............#",
    "#.##.#.#.#.##.#",
    "#....#.#.#....#",
    "###.##...##.###",
    "#.....#.#.....#",
    "#.###.....###.#",
    "#.....#.#.....#",
    "#.##.##.##.##.#",
    "#o...........o#",
    "#.#.#.#.#.#.#.#",
    "#.............#",
    "###############",
};
constexpr int H = 15, W = 15, kFright = 30;
constexpr Pos kStart{13, 7};
constexpr Pos kHome[3] = {{6, 6}, {6, 7}, {6, 8}};
enum Channel { kWall, kPellet, kPower, kGhost, kScared, kPlayer };

class Pellets final : public Game {
public:
    Pellets()
        : Game("pellets", H, W,
               {{"wall", {40, 60, 200}}, {"pellet", {230, 230, 200}}, {"power_pellet", {250, 150, 200}},
                {"ghost", {240, 50, 50}}, {"scared_ghost", {90, 110, 250}}, {"player", {250, 230, 40}}},
               {"NOOP", "UP", "RIGHT", "LEFT", "DOWN"}),
          wall_(parseMaze(kMaze)) {}

    void reset() override {
        lives_ = 3;
        over_ = false;
        frame_ = 0;
        fillPellets();
        restart();
    }

    float tick(int a) override {
        ++frame_;
        float reward = 0.f;
        if (a > 0 && !wall(p_ + kDirs[a - 1])) {
            p_ = p_ + kDirs[a - 1];
            heading_ = a - 1;
        }
        uint8_t& food = pellets_[size_t(idx(p_))];
        if (food == 1) reward += 1.f;
        if (food == 2) {
            reward += 5.f;
            fright_ = kFright;
            for (auto& g : ghosts_)
                if (frame_ >= g.release) {
                    g.scared = true;
                    g.dir = reverseDir(g.dir);
                }
        }
        food = 0;
        if (collide(reward)) return reward;

        for (size_t i = 0; i < ghosts_.size(); ++i) {
            Ghost& g = ghosts_[i];
            if (frame_ < g.release || (g.scared ? frame_ % 2 != 0 : frame_ % 3 == 0)) continue;
            std::vector<int> options;
            for (int d = 0; d < 4; ++d)
                if (!wall(g.p + kDirs[d]) && d != reverseDir(g.dir)) options.push_back(d);
            if (options.empty()) options.push_back(reverseDir(g.dir));
            Pos target = p_;
            if (i == 1) target = p_ + Pos{3 * kDirs[heading_].y, 3 * kDirs[heading_].x};
            bool wander = g.scared || chance(0.1) || (i == 2 && chance(0.5));
            int best = options[size_t(randint(int(options.size())))];
            if (!wander) {
                int bestDist = 1 << 20;
                for (int d : options) {
                    Pos n = g.p + kDirs[d];
                    int dist = (n.y - target.y) * (n.y - target.y) + (n.x - target.x) * (n.x - target.x);
                    if (dist < bestDist) {
                        bestDist = dist;
                        best = d;
                    }
                }
            }
            g.dir = best;
            g.p = g.p + kDirs[best];
        }
        if (collide(reward)) return reward;
        if (fright_ > 0 && --fright_ == 0)
            for (auto& g : ghosts_) g.scared = false;
        if (std::none_of(pellets_.begin(), pellets_.end(), [](uint8_t v) { return v != 0; })) {
            fillPellets();
            restart();
        }
        return reward;
    }

    void draw(Frame& f) const override {
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                Pos c{y, x};
                if (wall(c)) f.set(kWall, c);
                if (pellets_[size_t(idx(c))] == 1) f.set(kPellet, c);
                if (pellets_[size_t(idx(c))] == 2) f.set(kPower, c);
            }
        for (const auto& g : ghosts_) f.set(g.scared ? kScared : kGhost, g.p);
        f.set(kPlayer, p_);
    }

    // Shortest path to the nearest pellet (or scared ghost) through cells more than two
    // steps from every dangerous ghost; when boxed in, the move that maximises that distance.
    int scripted() const override {
        std::vector<Pos> danger;
        for (const auto& g : ghosts_)
            if (!g.scared) danger.push_back(g.p);
        const auto open = [&](Pos c) { return !wall(c); };
        const std::vector<int> dist = bfsDistances(H, W, danger, open);
        auto safe = [&](Pos c) { return open(c) && (dist[size_t(idx(c))] < 0 || dist[size_t(idx(c))] > 2); };
        int d = bfsFirstStep(H, W, p_, safe, [&](Pos c) {
            if (pellets_[size_t(idx(c))] != 0) return true;
            return fright_ > 6 && std::any_of(ghosts_.begin(), ghosts_.end(),
                                              [&](const Ghost& g) { return g.scared && g.p == c; });
        });
        if (d >= 0) return d + 1;
        int best = 0, bestDist = dist[size_t(idx(p_))];
        for (int k = 0; k < 4; ++k) {
            Pos n = p_ + kDirs[k];
            if (open(n) && dist[size_t(idx(n))] > bestDist) {
                bestDist = dist[size_t(idx(n))];
                best = k + 1;
            }
        }
        return best;
    }

private:
    struct Ghost {
        Pos p;
        int dir;
        int64_t release;
        bool scared;
    };

    bool wall(Pos c) const { return !inside(c) || wall_[size_t(idx(c))] != 0; }

    void fillPellets() {
        pellets_.assign(size_t(H * W), 0);
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x)
                if (!wall({y, x})) pellets_[size_t(y * W + x)] = kMaze[size_t(y)][size_t(x)] == 'o' ? 2 : 1;
        for (Pos h : kHome) pellets_[size_t(idx(h))] = 0;
        pellets_[size_t(idx(kStart))] = 0;
    }

    void restart() {
        p_ = kStart;
        heading_ = 0;
        fright_ = 0;
        ghosts_.clear();
        for (int i = 0; i < 3; ++i) ghosts_.push_back({kHome[i], 0, frame_ + 8 * i, false});
    }

    // Checked after the player's move and after the ghosts' (so passing through each other
    // counts too): eats scared ghosts; returns true when a life was lost.
    bool collide(float& reward) {
        for (size_t i = 0; i < ghosts_.size(); ++i) {
            Ghost& g = ghosts_[i];
            if (g.p != p_) continue;
            if (g.scared) {
                reward += 10.f;
                g = {kHome[i], 0, frame_ + 10, false};
                continue;
            }
            --lives_;
            restart();
            return true;
        }
        return false;
    }

    std::vector<uint8_t> wall_, pellets_;  // pellets_: 1 pellet, 2 power pellet
    Pos p_;
    int heading_ = 0, fright_ = 0;
    int64_t frame_ = 0;
    std::vector<Ghost> ghosts_;
};

} // namespace

std::unique_ptr<Game> makePellets() { return std::make_unique<Pellets>(); }

} // namespace glimpse::rl
