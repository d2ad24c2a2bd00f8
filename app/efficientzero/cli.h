#pragma once
// EfficientZero's headless commands (registered in app/efficientzero/family.cpp). Each takes
// the arguments after its subject and returns the exit code (app/family.h, Command).
#include <string>
#include <vector>

namespace glimpse::cli {

int trainEfficientZero(const std::vector<std::string>& args);  // glimpse train efficientzero ...
int play(const std::vector<std::string>& args);                // glimpse play --checkpoint C --env NAME
int evalWorldModel(const std::vector<std::string>& args);      // glimpse eval worldmodel EPISODE

} // namespace glimpse::cli
