#pragma once
// CoaT's headless commands (registered in app/coat/family.cpp). Each takes the arguments after
// its subject and returns the exit code (app/family.h, Command).
#include <string>
#include <vector>

namespace glimpse::cli {

int inferCoat(const std::vector<std::string>& args);   // glimpse infer --model coat ...
int benchCoat(const std::vector<std::string>& args);   // glimpse bench coat ...
int trainCoat(const std::vector<std::string>& args);   // glimpse train coat ...
int evalCoat(const std::vector<std::string>& args);    // glimpse eval coat ... (app/coat/cli_eval.cpp)

} // namespace glimpse::cli
