#pragma once
// LETR's headless commands (registered in app/letr/family.cpp). Each takes the arguments after
// its subject and returns the exit code (app/family.h, Command).
#include <memory>
#include <string>
#include <vector>

namespace glimpse::letr {
class LetrModel;
}
namespace glimpse::mlsd {
struct MlsdModel;
}

namespace glimpse::cli {

class Args;

int inferLetr(const std::vector<std::string>& args);       // glimpse infer --model letr ...
int benchLetr(const std::vector<std::string>& args);       // glimpse bench letr ...
int benchInspector(const std::vector<std::string>& args);  // glimpse bench inspector ...
int trainLetr(const std::vector<std::string>& args);       // glimpse train letr ...
int evalLetr(const std::vector<std::string>& args);        // glimpse eval letr ...
int evalEdges(const std::vector<std::string>& args);       // glimpse eval edges ...
int inferMlsd(const std::vector<std::string>& args);       // glimpse infer --model mlsd ... (cli_mlsd.cpp)
int benchMlsd(const std::vector<std::string>& args);       // glimpse bench mlsd ... (cli_mlsd.cpp)

// M-LSD tiny as shipped (resources/mlsd_tiny.h5), loaded once and shared (thread-safe); an
// Error when it is not installed. mlsdModelOption: the checkpoint of option `flag` when given,
// else the shipped one.
std::shared_ptr<mlsd::MlsdModel> shippedMlsd();
std::shared_ptr<mlsd::MlsdModel> mlsdModelOption(const Args& a, const std::string& flag);

// The model of infer and bench: --checkpoint, else a random one (--random-seed, --config,
// --backbone, --queries); in eval mode, resized by --short-side/--max-long-side, on --device.
// `desc` says which.
std::shared_ptr<letr::LetrModel> letrModelFromArgs(const Args& a, std::string& desc);

// --flips (default 1): the views of the flip ensemble (core/models/letr/flips.h); 1, 2 or 4.
int flipsOption(const Args& a);

} // namespace glimpse::cli
