#pragma once
// ConstellationNet commands (docs/cli.md): `glimpse train constellation`, `glimpse eval fewshot`.
#include <string>
#include <vector>

namespace glimpse::app::constellation {

int trainCommand(const std::vector<std::string>& args);
int evalFewShotCommand(const std::vector<std::string>& args);
// Usage synopses (the command table prints them).
extern const char* kTrainSynopsis;
extern const char* kEvalSynopsis;

} // namespace glimpse::app::constellation
