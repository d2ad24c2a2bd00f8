// alien: collect the eggs laid along the corridors of a ship while three aliens hunt you down
// the shortest path (three frames in five, one move in four at random). FIRE shoots a flame
// three cells ahead (the way you last moved) instead of moving; an alien it touches is driven
// back to the nest. A cleared deck is worth a bonus and is laid again.
#include <algorithm>

#include "core/rl/envs/game.h"

namespace glimpse::rl {
namespace {

const std::vector<std::string> kDeck = {
    "#############",
    "#.....#.....#",
    "#.###.#.###.#",
    "#.#.......#.#",
    "#.#.##.##.#.#",
    "#...#...#...#",
    "###.#.#.#.###",
    "#.....#.....#",
    "#.##.###.##.#",
    "#...........#",
    "#.#.#.#.#.#.#",
    "#...#...#...#",
    "#############",
};
constexpr int H = 13, W = 13, kFlameReach = 3;
constexpr Pos kStart{11, 6};
constexpr Pos kNest[3] = {{5, 6}, {5, 5}, {5, 7}};
enum Channel { kWall, kEgg, kFlame, kAlien, kPlayer };
enum Action { NOOP, FIRE, UP, RIGHT, LEFT, DOWN };

class Alien final : public Game {
public:
    Alien()
        : Game("alien", H, W,
               {{"wall", {70, 90, 80}}, {"egg", {210, 200, 150}}, {"flame", {250, 140, 30}},
                {"alien", {120, 240, 80}}, {"player", {240, 240, 250}}},
               {"NOOP", "FIRE", "UP", "RIGHT", "LEFT", "DOWN"}),
          wall_(parseMaze(kDeck)) {}

    void reset() override {
        lives_ = 3;
        over_ = false;
        frame_ = 0;
        layEggs();
        restart();
    }

    float tick(int a) override {
        ++frame_;
        float reward = 0.f;
        flame_.clear();
        if (a >= UP && !wall(p_ + kDirs[a - UP])) {
            facing_ = a - UP;
            p_ = p_ + kDirs[facing_];
        } else if (a >= UP) {
            facing_ = a - UP;
        }
        if (eggs_[size_t(idx(p_))]) {
            eggs_[size_t(idx(p_))] = 0;
            reward += 1.f;
        }
        if (a == FIRE)
            for (Pos c = p_ + kDirs[facing_]; !wall(c) && int(flame_.size()) < kFlameReach; c = c + kDirs[facing_])
                flame_.push_back(c);
        scorch();
        if (caught()) return reward;

        if (frame_ % 5 == 0 || frame_ % 5 == 1 || frame_ % 5 == 3) {
            const std::vector<int> dist = bfsDistances(H, W, {p_}, [&](Pos c) { return !wall(c); });
            for (auto& al : aliens_) {
                if (frame_ < al.release) continue;
                std::vector<Pos> moves;
                for (Pos d : kDirs)
                    if (!wall(al.p + d)) moves.push_back(al.p + d);
                Pos next = moves[size_t(randint(int(moves.size())))];
                if (!chance(0.25))
                    for (Pos n : moves)
                        if (dist[size_t(idx(n))] < dist[size_t(idx(next))]) next = n;
                al.p = next;
            }
        }
        scorch();
        if (caught()) return reward;
        if (std::none_of(eggs_.begin(), eggs_.end(), [](uint8_t e) { return e != 0; })) {
            reward += 10.f;
            layEggs();
            restart();
        }
        return reward;
    }

    void draw(Frame& f) const override {
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                if (wall({y, x})) f.set(kWall, {y, x});
                if (eggs_[size_t(y * W + x)]) f.set(kEgg, {y, x});
            }
        for (Pos c : flame_) f.set(kFlame, c);
        for (const auto& al : aliens_) f.set(kAlien, al.p);
        f.set(kPlayer, p_);
    }

    // Flame an alien in reach ahead; otherwise the shortest path to the nearest egg through
    // cells more than two steps from every alien, or the move that gets furthest from them.
    int scripted() const override {
        std::vector<Pos> hunters;
        for (const auto& al : aliens_) hunters.push_back(al.p);
        const auto open = [&](Pos c) { return !wall(c); };
        const std::vector<int> dist = bfsDistances(H, W, hunters, open);
        for (Pos c = p_ + kDirs[facing_]; !wall(c) && manhattan(c, p_) <= kFlameReach; c = c + kDirs[facing_])
            if (std::find(hunters.begin(), hunters.end(), c) != hunters.end()) return FIRE;
        auto safe = [&](Pos c) { return open(c) && dist[size_t(idx(c))] > 2; };
        int d = bfsFirstStep(H, W, p_, safe, [&](Pos c) { return eggs_[size_t(idx(c))] != 0; });
        if (d >= 0) return UP + d;
        int best = NOOP, bestDist = dist[size_t(idx(p_))];
        for (int k = 0; k < 4; ++k) {
            Pos n = p_ + kDirs[k];
            if (open(n) && dist[size_t(idx(n))] > bestDist) {
                bestDist = dist[size_t(idx(n))];
                best = UP + k;
            }
        }
        return best;
    }

private:
    struct Hunter {
        Pos p;
        int64_t release;
    };

    bool wall(Pos c) const { return !inside(c) || wall_[size_t(idx(c))] != 0; }

    void layEggs() {
        eggs_.assign(size_t(H * W), 0);
        for (int i = 0; i < H * W; ++i) eggs_[size_t(i)] = wall_[size_t(i)] ? 0 : 1;
        for (Pos n : kNest) eggs_[size_t(idx(n))] = 0;
        eggs_[size_t(idx(kStart))] = 0;
    }

    void restart() {
        p_ = kStart;
        facing_ = 0;
        flame_.clear();
        aliens_.clear();
        for (int i = 0; i < 3; ++i) aliens_.push_back({kNest[i], frame_ + 6 + 10 * i});
    }

    // Aliens in the flame go back to the nest.
    void scorch() {
        for (size_t i = 0; i < aliens_.size(); ++i)
            if (std::find(flame_.begin(), flame_.end(), aliens_[i].p) != flame_.end())
                aliens_[i] = {kNest[i], frame_ + 12};
    }

    bool caught() {
        if (std::none_of(aliens_.begin(), aliens_.end(), [&](const Hunter& al) { return al.p == p_; })) return false;
        --lives_;
        restart();
        return true;
    }

    std::vector<uint8_t> wall_, eggs_;
    Pos p_;
    int facing_ = 0;
    int64_t frame_ = 0;
    std::vector<Pos> flame_;
    std::vector<Hunter> aliens_;
};

} // namespace

std::unique_ptr<Game> makeAlien() { return std::make_unique<Alien>(); }

} // namespace glimpse::rl
