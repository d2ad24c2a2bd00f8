// The command table of the `glimpse` executable: the general commands, every model family's
// (app/cli/command.h) and, in a GUI build, the few that need the GUI stack (added by main());
// one dispatcher and the usage text built from the same table.
#include <algorithm>
#include <iostream>

#include "app/cli/cli.h"
#include "app/cli/command.h"
#include "app/cli/replay_cli.h"
#include "app/cli/results_cli.h"
#include "core/error.h"

namespace glimpse::cli {

namespace {

using app::Command;

std::vector<Command> generalCommands() {
    return {
        {"info", "", "FILE.h5 ...", "describe a checkpoint, trace, run log or episode", info},
        {"env", "", "list | score [--episodes K]", "the built-in arcade games", env},
        {"bench", "rl", "[--threads T]", "environment and MCTS throughput", benchRl},
        {"data", "export", "--data SPEC --out DIR", "write a line dataset as images + JSON", dataExport},
        {"data", "verify", "FILE.h5 ...", "read every dataset, verifying every checksum", dataVerify},
        {"data", "resave", "IN.h5 [--out OUT.h5]", "rewrite a checkpoint with checksums (tensors bit-identical)", dataResave},
        {"data", "import-episode", "(--minari F.hdf5 [--episode N] | --frames DIR [--csv F]) --out E.h5",
         "import a Minari or PNG-folder episode", importEpisode},
        {"check", "device", "[--device cuda[:N]] [--tolerance T]", "LETR, CoaT, EfficientZero on a GPU against the CPU",
         checkDevice},
        {"check", "file", "FILE.h5 ...", "read a file's whole HDF5 structure and print its kind (JSON)", checkFile},
        {"bench", "replay", "[--steps N] [--file EPISODE.h5]", "episode open time, memory and scrub times",
         benchReplay},
        {"bench", "results", "[--samples N] [--keep-lines K] [--file R.h5]",
         "results file size, open time, table sort/filter times", benchResults},
    };
}

// Rows a GUI build adds (addCommands), before the table is first used.
std::vector<Command>& added() {
    static std::vector<Command> rows;
    return rows;
}
bool& tableBuilt() {
    static bool built = false;
    return built;
}

const std::vector<Command>& table() {
    static const std::vector<Command> all = [] {
        std::vector<Command> t = generalCommands();
        for (const auto& c : familyCommands()) t.push_back(c);
        for (const auto& c : added()) t.push_back(c);
        tableBuilt() = true;
        return t;
    }();
    return all;
}

std::string usageLine(const Command& c) {
    std::string l = "glimpse " + c.verb;
    if (!c.subject.empty()) l += c.verb == "infer" ? " --model " + c.subject : " " + c.subject;
    if (!c.synopsis.empty()) l += " " + c.synopsis;
    return l;
}

// "usage: glimpse eval letr ...\n       glimpse eval ...": the lines of one verb.
std::string verbUsage(const std::string& verb) {
    std::string out;
    for (const auto& c : table())
        if (c.verb == verb) out += (out.empty() ? "usage: " : "       ") + usageLine(c) + "\n";
    return out;
}

std::string subjects(const std::string& verb) {
    std::string out;
    for (const auto& c : table())
        if (c.verb == verb && !c.subject.empty()) out += (out.empty() ? "" : ", ") + c.subject;
    return out;
}

bool wantsHelp(const std::vector<std::string>& args) {
    return std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; });
}

// The row and the arguments it gets for `glimpse verb args...`; null when the subject is
// missing or unknown (then *why says so).
const Command* resolve(const std::string& verb, const std::vector<std::string>& args, std::vector<std::string>& rest,
                       std::string* why) {
    if (verb == "infer") {   // glimpse infer --model SUBJECT ... (default letr); the row gets everything
        std::string model = "letr";
        for (size_t i = 0; i + 1 < args.size(); ++i)
            if (args[i] == "--model") model = args[i + 1];
        rest = args;
        for (const auto& c : table())
            if (c.verb == verb && c.subject == model) return &c;
        *why = "--model " + model + " is not supported (supported: " + subjects(verb) + ")";
        return nullptr;
    }
    for (const auto& c : table()) {
        if (c.verb != verb) continue;
        if (c.subject.empty()) {
            rest = args;
            return &c;
        }
        if (!args.empty() && args[0] == c.subject) {
            rest.assign(args.begin() + 1, args.end());
            return &c;
        }
    }
    *why = args.empty() || args[0].rfind("-", 0) == 0 ? std::string()
                                                        : "unknown model '" + args[0] + "' (one of: " + subjects(verb) + ")";
    return nullptr;
}

} // namespace

void addCommands(const std::vector<Command>& commands) {
    if (tableBuilt()) throw Error("addCommands: the command table is already in use");
    added().insert(added().end(), commands.begin(), commands.end());
}

std::vector<Command> familyCommands() {
    std::vector<Command> all;
    for (const auto& list : {letrCommands(), coatCommands(), efficientZeroCommands(), constellationCommands(), xtraCommands()})
        all.insert(all.end(), list.begin(), list.end());
    return all;
}

std::string commandsUsage() {
    std::string out;
    for (const auto& c : table()) {
        std::string l = usageLine(c);
        if (l.size() < 54) l.resize(54, ' ');
        else l += "\n" + std::string(61, ' ');   // the summary on its own line, in the column
        out += "       " + l + " " + c.summary + "\n";
    }
    return out;
}

int runCommand(const std::string& verb, const std::vector<std::string>& args, bool* handled) {
    *handled = std::any_of(table().begin(), table().end(), [&](const Command& c) { return c.verb == verb; });
    if (!*handled) return 2;
    std::vector<std::string> rest;
    std::string why;
    const Command* c = resolve(verb, args, rest, &why);
    if (!c) {
        if (why.empty() && wantsHelp(args)) {   // `glimpse train --help`: the verb's commands
            std::cout << verbUsage(verb) << "Run 'glimpse " << verb << " SUBJECT --help' for one's options.\n";
            return 0;
        }
        if (why.empty() && !args.empty()) {   // `glimpse train --bogus`: no subject given
            std::cerr << "glimpse " << verb << ": expected one of " << subjects(verb) << " before " << args[0] << "\n"
                      << verbUsage(verb);
        } else if (why.empty()) {   // no subject: say which there are
            std::cout << verbUsage(verb);
        } else {
            std::cerr << "glimpse " << verb << ": " << why << "\n" << verbUsage(verb);
        }
        return 2;
    }
    try {
        // --help anywhere: the command's own help (options never take "--help" as a value).
        if (wantsHelp(rest)) {
            // A command without a help text of its own (or one that refuses "--help"): its synopsis.
            int rc = 2;
            try {
                rc = c->run({"--help"});
            } catch (const UsageError&) {
            }
            if (rc != 0) std::cout << "usage: " << usageLine(*c) << "\n" << c->summary << "\n";
            return 0;
        }
        return c->run(rest);
    } catch (const UsageError& e) {   // bad usage: status 2, and where the options are listed
        std::string name = "glimpse " + verb;
        if (!c->subject.empty()) name += verb == "infer" ? " --model " + c->subject : " " + c->subject;
        std::cerr << "glimpse " << verb << ": " << e.what() << " ('" << name << " --help' lists the options)\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "glimpse " << verb << ": " << e.what() << "\n";
        return 1;
    }
}

} // namespace glimpse::cli
