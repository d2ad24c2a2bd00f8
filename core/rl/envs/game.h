#pragma once
// The built-in arcade suite: small grid games with Atari-like mechanics. A Game is the rules
// of one game on one frame clock; ArcadeEnv (env.cpp) adds sticky actions, frame skip and the
// episode step limit on top. Games draw into a multi-channel 0/1 grid (Frame), one channel
// per kind of object, listed background to foreground (render() paints them in that order);
// the last channel is always the player.
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace glimpse::rl {

struct Pos {
    int y = 0, x = 0;
};
inline bool operator==(Pos a, Pos b) { return a.y == b.y && a.x == b.x; }
inline bool operator!=(Pos a, Pos b) { return !(a == b); }
inline Pos operator+(Pos a, Pos b) { return {a.y + b.y, a.x + b.x}; }
inline int manhattan(Pos a, Pos b) { return std::abs(a.y - b.y) + std::abs(a.x - b.x); }

// Compass moves in the order the maze games number their actions: UP, RIGHT, LEFT, DOWN.
inline constexpr Pos kDirs[4] = {{-1, 0}, {0, 1}, {0, -1}, {1, 0}};
inline int reverseDir(int d) { return 3 - d; }

struct Rgb {
    uint8_t r, g, b;
};
struct ChannelInfo {
    std::string name;
    Rgb color;
};

// A [C, H, W] float grid, row-major, all zeros after construction.
struct Frame {
    Frame(int c, int h, int w) : C(c), H(h), W(w), data(size_t(c) * h * w, 0.f) {}
    void set(int c, Pos p, float v = 1.f) {
        if (p.y >= 0 && p.y < H && p.x >= 0 && p.x < W) data[(size_t(c) * H + p.y) * W + p.x] = v;
    }
    float at(int c, int y, int x) const { return data[(size_t(c) * H + y) * W + x]; }
    int C, H, W;
    std::vector<float> data;
};

class Game {
public:
    Game(std::string name, int height, int width, std::vector<ChannelInfo> channels,
         std::vector<std::string> actions)
        : name_(std::move(name)), h_(height), w_(width), channels_(std::move(channels)),
          actions_(std::move(actions)) {}
    virtual ~Game() = default;

    const std::string& name() const { return name_; }
    int height() const { return h_; }
    int width() const { return w_; }
    const std::vector<ChannelInfo>& channels() const { return channels_; }
    const std::vector<std::string>& actions() const { return actions_; }
    int lives() const { return lives_; }
    bool over() const { return over_ || lives_ <= 0; }

    // Starts an episode; all randomness comes from rng, seeded by the caller beforehand.
    virtual void reset() = 0;
    // Advances one frame under `action` (0 <= action < actions().size()); returns the reward.
    virtual float tick(int action) = 0;
    virtual void draw(Frame& f) const = 0;
    // The scripted reference policy: a deterministic function of the current state.
    virtual int scripted() const = 0;

    std::mt19937_64 rng;

protected:
    bool inside(Pos p) const { return p.y >= 0 && p.y < h_ && p.x >= 0 && p.x < w_; }
    int idx(Pos p) const { return p.y * w_ + p.x; }
    double uniform() { return double(rng() >> 11) * 0x1.0p-53; }
    int randint(int n) { return int(rng() % uint64_t(n)); }
    bool chance(double p) { return uniform() < p; }

    int lives_ = 0;
    bool over_ = false;

private:
    std::string name_;
    int h_, w_;
    std::vector<ChannelInfo> channels_;
    std::vector<std::string> actions_;
};

using Passable = std::function<bool(Pos)>;
// Breadth-first distances (4-neighbourhood) from the sources; -1 where unreachable.
std::vector<int> bfsDistances(int h, int w, const std::vector<Pos>& sources, const Passable& passable);
// The first move (index into kDirs) of a shortest passable path from `from` to the nearest
// cell where goal() holds, or -1 when no such cell is reachable. `from` itself is never a goal.
int bfsFirstStep(int h, int w, Pos from, const Passable& passable, const Passable& goal);
// Parses a maze drawn with '#' for walls; returns the wall mask (1 = wall), row-major.
std::vector<uint8_t> parseMaze(const std::vector<std::string>& rows);

// The eight games (one .cpp each in core/rl/envs/).
std::unique_ptr<Game> makeInvaders();
std::unique_ptr<Game> makeDemon();
std::unique_ptr<Game> makeSub();
std::unique_ptr<Game> makeBreakout();
std::unique_ptr<Game> makePellets();
std::unique_ptr<Game> makeHeist();
std::unique_ptr<Game> makeAlien();
std::unique_ptr<Game> makePainter();

} // namespace glimpse::rl
