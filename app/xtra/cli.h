#pragma once
// XTRA's headless commands (app/xtra/cli.cpp).
#include <string>
#include <vector>

namespace glimpse::cli {

int dataOffline(const std::vector<std::string>& args);        // glimpse data offline ...
int trainXtraPretrain(const std::vector<std::string>& args);  // glimpse train xtra-pretrain ...
int trainXtra(const std::vector<std::string>& args);          // glimpse train xtra ...

} // namespace glimpse::cli
