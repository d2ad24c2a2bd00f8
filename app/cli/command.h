#pragma once
// One row of the `glimpse` command table (Qt-free: the headless build has it too), and the
// command lists of the model families (each family's commands.cpp), which the table
// (app/cli/commands.cpp) and the GUI's family registry (app/family.h) both use.
#include <functional>
#include <string>
#include <vector>

namespace glimpse::app {

// A headless command: `glimpse VERB SUBJECT ARGS...` (for "infer", `glimpse infer --model
// SUBJECT ARGS...`). `run` gets the arguments after the subject (infer: all of them), prints,
// and returns the exit code (0 ok, 1 failure, 2 bad usage); it may throw glimpse::Error.
struct Command {
    std::string verb;       // "train", "bench", "infer", "eval", "play", "info", ...
    std::string subject;    // "letr", "rl", ...; "" for a verb without subjects (info, env, play)
    std::string synopsis;   // the options after "glimpse VERB SUBJECT" in the usage line
    std::string summary;    // what it does, a few words
    std::function<int(const std::vector<std::string>&)> run;
};

} // namespace glimpse::app

namespace glimpse::cli {

std::vector<app::Command> letrCommands();            // app/letr/commands.cpp
std::vector<app::Command> coatCommands();            // app/coat/commands.cpp
std::vector<app::Command> efficientZeroCommands();   // app/efficientzero/commands.cpp
std::vector<app::Command> constellationCommands();   // app/constellation/commands.cpp
std::vector<app::Command> xtraCommands();            // app/xtra/commands.cpp
// Every family's, in menu order (the table of the headless build and of the GUI build alike).
std::vector<app::Command> familyCommands();
// Commands that need the GUI stack (Qt, the Vulkan renderer): absent from a headless build.
std::vector<app::Command> guiCommands();               // app/gui_commands.cpp

} // namespace glimpse::cli
