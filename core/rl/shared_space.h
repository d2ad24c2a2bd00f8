#pragma once
// The arcade suite's shared observation and action space (docs/xtra.md "Shared space"), what a
// multi-task world model (XTRA) sees and acts in, as XTRA's Atari models share 96x96 RGB frames
// and the 18 Atari actions:
//   - actions: the union of the suite's action names in a fixed order (Atari's ids first):
//     NOOP, FIRE, UP, RIGHT, LEFT, DOWN, RIGHTFIRE, LEFTFIRE, JUMP; each game's own actions map
//     into it by name, the others are illegal in that game;
//   - observations: the game's frame drawn in colour, one pixel per grid cell (each cell the
//     colour of its foremost object, black when empty), in the top-left corner of a 3 x 15 x 15
//     canvas (the largest grid of the suite), values in [0, 1].
// `makeEnv("shared:GAME")` is GAME in this space: every tool that takes an environment name
// (training, play, recording, the replay viewer) works with it.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rl/env.h"

namespace glimpse::rl {

inline constexpr const char* kSharedPrefix = "shared:";

// "shared:demon" -> true; "demon" -> false.
bool isSharedName(const std::string& env);
// "shared:demon" -> "demon"; a name without the prefix is returned unchanged.
std::string baseGameName(const std::string& env);

const std::vector<std::string>& sharedActionNames();
int sharedActionCount();
ObsShape sharedObservationShape();

// One game's actions in the shared space.
struct ActionMap {
    std::string game;
    std::vector<int> toShared;   // native action -> shared id
    std::vector<int> toNative;   // shared id -> native action, -1 where the game lacks it
    std::vector<int> legal;      // the shared ids of the game's actions, ascending

    // From a game's action names; glimpse::Error naming a name outside the shared set.
    static ActionMap fromNames(const std::string& game, const std::vector<std::string>& names);
    int numNative() const { return int(toShared.size()); }
    // Native probabilities (numNative values) -> shared (sharedActionCount values, 0 where illegal).
    std::vector<float> policyToShared(const float* native) const;
};
// The map of a built-in game (the "shared:" prefix is ignored); glimpse::Error for an unknown name.
ActionMap actionMap(const std::string& game);

using Colour = std::array<uint8_t, 3>;
// Draws a native frame ([C, H, W], values in [0, 1], C = colours.size()) into the shared canvas
// dst (sharedObservationShape().numel() floats): each cell blends the colours of its channels
// from first to last over black, as Env::render does over its background.
void sharedFrameInto(const std::vector<Colour>& colours, const float* native, const ObsShape& shape, float* dst);
// The same from bytes (value * 255, as GameHistory stores frames).
void sharedFrameInto(const std::vector<Colour>& colours, const uint8_t* native, const ObsShape& shape, float* dst);

// GAME in the shared space (the name without "shared:"); glimpse::Error for an unknown game.
std::unique_ptr<Env> makeSharedEnv(const std::string& game, const EnvOptions& options = {});

} // namespace glimpse::rl
