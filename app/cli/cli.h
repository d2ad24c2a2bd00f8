#pragma once
// Headless subcommands of the `glimpse` executable: the command table (app/cli/commands.cpp:
// the general commands below plus every model family's, app/cli/command.h) and the option parser
// they share. Each command takes the arguments after its subject (for `glimpse info a.h5`,
// args = {"a.h5"}), prints to stdout/stderr and returns the process exit code: 0 success,
// 1 failure (message on stderr), 2 bad usage.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace glimpse::app {
struct Command;
}

namespace glimpse::cli {

// Runs `glimpse VERB ARGS...` when VERB is a command: sets *handled and returns the exit code
// (errors thrown by the command are printed as "glimpse VERB: message" with code 1). Leaves
// *handled false when VERB is no command (then it is a file for the GUI, or a typo).
int runCommand(const std::string& verb, const std::vector<std::string>& args, bool* handled);
// The command lines of `glimpse --help`, one per command, from the table.
std::string commandsUsage();
// What a GUI build adds before the first dispatch (app/main.cpp): the commands that need the
// GUI stack (guiCommands()) and the follower behind `glimpse info --follow`. A headless build
// adds neither. addCommands throws once the table is in use.
void addCommands(const std::vector<app::Command>& commands);
void setRunLogFollower(std::function<int(const std::vector<std::string>&)> follow);

// General commands (not of one model family).
int info(const std::vector<std::string>& args);        // glimpse info FILE.h5
int env(const std::vector<std::string>& args);         // glimpse env list | score
int benchRl(const std::vector<std::string>& args);     // glimpse bench rl [--threads T]
int benchUi(const std::vector<std::string>& args);     // glimpse bench ui (GUI builds: app/gui_cli/bench_ui.cpp)
// glimpse info --follow RUN.h5 (GUI builds: app/gui_cli/follow.cpp; it follows a run log as the
// Training panel does, with the panel's RunFollower).
int followRunLog(const std::vector<std::string>& args);
int dataExport(const std::vector<std::string>& args);  // glimpse data export ...
int dataVerify(const std::vector<std::string>& args);  // glimpse data verify FILE.h5 ... (app/cli/integrity.cpp)
int dataResave(const std::vector<std::string>& args);  // glimpse data resave IN.h5 [--out OUT.h5]
int checkDevice(const std::vector<std::string>& args); // glimpse check device (app/cli/device_check.cpp)
int checkFile(const std::vector<std::string>& args);   // glimpse check file FILE.h5 ... (app/cli/info.cpp)

// Bad usage (an unknown option, an option without its value): the dispatcher prints it with
// the command's name and exits with status 2, where other Errors exit with 1.
class UsageError : public Error {
public:
    using Error::Error;
};

// Minimal option parser shared by the subcommands: "--key value", "--flag", positionals.
// An option last on the line without its value is reported by checkKnown() (as unknown when it
// is, so `--bogus` names itself) or by reading it ("--out: expected a value after it").
class Args {
public:
    // `flags` are options that take no value (e.g. "--layers-all").
    Args(const std::vector<std::string>& args, const std::vector<std::string>& flags = {});
    bool has(const std::string& key) const;                       // key like "--out"
    std::optional<std::string> get(const std::string& key) const;
    std::string get(const std::string& key, const std::string& def) const;
    // Throws glimpse::Error("--key: expected a number, got 'x'") on bad numbers.
    double getDouble(const std::string& key, double def) const;
    long long getInt(const std::string& key, long long def) const;
    std::string require(const std::string& key) const;            // throws Error when absent
    const std::vector<std::string>& positional() const { return positional_; }
    // Keys given that are not in `known`: reported as a UsageError (catches typos), then an
    // option left without its value.
    void checkKnown(const std::vector<std::string>& known) const;

private:
    void checkValue(const std::string& key) const;
    std::map<std::string, std::string> values_;
    std::string missingValue_;   // the option last on the line without its value ("": none)
    std::vector<std::string> positional_;
};

} // namespace glimpse::cli
