// heist: drive a getaway car through a city grid, robbing banks (each robbery in a city is
// worth one more). A robbed bank turns into a police car a few frames later; police chase at
// half speed. Dynamite dropped behind the car (it costs fuel; the car is immune) blows up
// police around it five frames later. The engine burns fuel every frame, moving or not (a car
// parked against a wall runs dry too); leaving through an exit on the right starts a new city,
// with a full tank if a bank was robbed in the one left. Row 0 is the fuel gauge.
#include <algorithm>
#include <optional>

#include "core/rl/envs/game.h"

namespace glimpse::rl {
namespace {

constexpr int H = 13, W = 15, kMaxFuel = 150, kBanks = 3, kMaxPolice = 3, kFuse = 5, kDynamiteFuel = 10;
constexpr Pos kStart{5, 1};
enum Channel { kWall, kFuel, kBank, kDynamite, kPolice, kCar };
enum Action { NOOP, UP, RIGHT, LEFT, DOWN, FIRE };

class Heist final : public Game {
public:
    Heist()
        : Game("heist", H, W,
               {{"wall", {110, 110, 120}}, {"fuel", {240, 120, 40}}, {"bank", {60, 210, 90}},
                {"dynamite", {250, 200, 40}}, {"police", {70, 110, 250}}, {"car", {250, 250, 250}}},
               {"NOOP", "UP", "RIGHT", "LEFT", "DOWN", "FIRE"}) {}

    void reset() override {
        lives_ = 3;
        over_ = false;
        frame_ = 0;
        newCity();
    }

    float tick(int a) override {
        ++frame_;
        float reward = 0.f;
        --fuel_;
        if (a >= UP && a <= DOWN && !wall(p_ + kDirs[a - 1])) p_ = p_ + kDirs[a - 1];
        if (a == FIRE && !dynamite_) {
            dynamite_ = Fuse{p_, kFuse};
            fuel_ -= kDynamiteFuel;
        }
        if (p_.x == W - 1) {  // through the exit: a full tank only after a robbery here
            const int fuel = fuel_;
            const bool refuel = robbed_ > 0;
            newCity();
            if (!refuel) fuel_ = fuel;
            if (fuel_ <= 0) loseLife();
            return reward;
        }
        auto bank = std::find(banks_.begin(), banks_.end(), p_);
        if (bank != banks_.end()) {
            reward += float(1 + std::min(robbed_++, 4));
            pending_.push_back({*bank, 6});
            banks_.erase(bank);
            placeBank();
        }
        if (caught()) return reward;

        if (frame_ % 2 == 0) {
            const std::vector<int> dist = bfsDistances(H, W, {p_}, [&](Pos c) { return !wall(c); });
            for (auto& cop : police_) {  // down the distance field, one move in five at random
                std::vector<Pos> moves;
                for (Pos d : kDirs)
                    if (!wall(cop + d)) moves.push_back(cop + d);
                Pos next = moves[size_t(randint(int(moves.size())))];
                if (!chance(0.2))
                    for (Pos n : moves)
                        if (dist[size_t(idx(n))] < dist[size_t(idx(next))]) next = n;
                cop = next;
            }
        }
        for (auto it = pending_.begin(); it != pending_.end();)
            if (--it->frames > 0) {
                ++it;
            } else {
                if (police_.size() < kMaxPolice) police_.push_back(it->p);
                it = pending_.erase(it);
            }
        if (dynamite_ && --dynamite_->frames == 0) {
            const Pos at = dynamite_->p;
            auto blasted = [at](Pos c) { return std::max(std::abs(c.y - at.y), std::abs(c.x - at.x)) <= 1; };
            size_t before = police_.size();
            police_.erase(std::remove_if(police_.begin(), police_.end(), blasted), police_.end());
            reward += 2.f * float(before - police_.size());
            dynamite_.reset();
        }
        if (caught()) return reward;
        if (fuel_ <= 0) loseLife();
        return reward;
    }

    void draw(Frame& f) const override {
        for (int y = 1; y < H; ++y)
            for (int x = 0; x < W; ++x)
                if (wall({y, x})) f.set(kWall, {y, x});
        for (int x = 0; x < (fuel_ * W + kMaxFuel - 1) / kMaxFuel; ++x) f.set(kFuel, {0, x});
        for (Pos b : banks_) f.set(kBank, b);
        if (dynamite_) f.set(kDynamite, dynamite_->p);
        for (Pos c : police_) f.set(kPolice, c);
        f.set(kCar, p_);
    }

    // Head for the exit when fuel gets short, drop dynamite when police come close, otherwise
    // take the shortest path to a bank that keeps more than two cells from police.
    int scripted() const override {
        const auto open = [&](Pos c) { return !wall(c); };
        const std::vector<int> cops = bfsDistances(H, W, police_, open);
        auto copDist = [&](Pos c) { return police_.empty() ? 1 << 20 : cops[size_t(idx(c))]; };
        auto safe = [&](Pos c) { return !wall(c) && copDist(c) > 2; };
        if (!dynamite_ && copDist(p_) <= 2 && fuel_ > 3 * kDynamiteFuel) return FIRE;
        const std::vector<int> home = bfsDistances(H, W, {p_}, open);
        int exitDist = 1 << 20;
        for (int y = 1; y < H; ++y) {
            int d = home[size_t(idx({y, W - 1}))];
            if (!wall({y, W - 1}) && d >= 0) exitDist = std::min(exitDist, d);
        }
        const bool leave = fuel_ < exitDist + 10;
        int d = bfsFirstStep(H, W, p_, safe, [&](Pos c) {
            return leave ? c.x == W - 1 : std::find(banks_.begin(), banks_.end(), c) != banks_.end();
        });
        if (d >= 0) return d + 1;
        int best = NOOP, bestDist = copDist(p_);
        for (int k = 0; k < 4; ++k) {
            Pos n = p_ + kDirs[k];
            if (!wall(n) && copDist(n) > bestDist) {
                bestDist = copDist(n);
                best = k + 1;
            }
        }
        return best;
    }

private:
    struct Fuse {
        Pos p;
        int frames;
    };

    // Streets run along rows 2, 5, 8, 11 and columns 1, 4, 7, 10, 13; the 2x2 blocks between
    // them are buildings, three of which (chosen per city) are open squares. Exits: right
    // border on rows 5 and 8.
    void newCity() {
        wall_.assign(size_t(H * W), 1);
        for (int y = 1; y < H - 1; ++y)
            for (int x = 1; x < W - 1; ++x)
                if (y % 3 == 2 || (x % 3 == 1 && y >= 2)) wall_[size_t(y * W + x)] = 0;
        for (int k = 0; k < 3; ++k) {
            int by = 3 + 3 * randint(3), bx = 2 + 3 * randint(4);
            for (int y = by; y < by + 2; ++y)
                for (int x = bx; x < bx + 2; ++x) wall_[size_t(y * W + x)] = 0;
        }
        wall_[size_t(5 * W + W - 1)] = wall_[size_t(8 * W + W - 1)] = 0;
        robbed_ = 0;
        restart();
        banks_.clear();
        for (int k = 0; k < kBanks; ++k) placeBank();
    }

    void restart() {
        p_ = kStart;
        fuel_ = kMaxFuel;
        police_.clear();
        pending_.clear();
        dynamite_.reset();
    }

    void placeBank() {
        for (;;) {
            Pos c{1 + randint(H - 2), 1 + randint(W - 2)};
            if (!wall(c) && manhattan(c, p_) >= 5 && std::find(banks_.begin(), banks_.end(), c) == banks_.end()) {
                banks_.push_back(c);
                return;
            }
        }
    }

    bool caught() {
        if (std::find(police_.begin(), police_.end(), p_) == police_.end()) return false;
        loseLife();
        return true;
    }

    void loseLife() {
        --lives_;
        restart();
    }

    bool wall(Pos c) const { return !inside(c) || c.y == 0 || wall_[size_t(idx(c))] != 0; }

    std::vector<uint8_t> wall_;
    Pos p_;
    int fuel_ = 0, robbed_ = 0;
    int64_t frame_ = 0;
    std::vector<Pos> banks_, police_;
    std::vector<Fuse> pending_;
    std::optional<Fuse> dynamite_;
};

} // namespace

std::unique_ptr<Game> makeHeist() { return std::make_unique<Heist>(); }

} // namespace glimpse::rl
