#pragma once
// ConstellationNet commands (docs/cli.md): `glimpse train constellation`, `glimpse eval fewshot`,
// `glimpse bench constellation`, `glimpse infer --model constellation`.
#include <string>
#include <vector>

namespace glimpse::app::constellation {

int trainCommand(const std::vector<std::string>& args);
int evalFewShotCommand(const std::vector<std::string>& args);
int benchCommand(const std::vector<std::string>& args);   // cli_bench.cpp
int inferCommand(const std::vector<std::string>& args);   // cli_infer.cpp
// Usage synopses (the command table prints them).
extern const char* kTrainSynopsis;
extern const char* kEvalSynopsis;
extern const char* kBenchSynopsis;
extern const char* kInferSynopsis;

} // namespace glimpse::app::constellation
