#include <iostream>

#include "app/cli/cli.h"
#include "core/error.h"
#include "core/info.h"

namespace glimpse::cli {

namespace {
std::function<int(const std::vector<std::string>&)>& follower() {
    static std::function<int(const std::vector<std::string>&)> fn;
    return fn;
}
} // namespace

void setRunLogFollower(std::function<int(const std::vector<std::string>&)> follow) { follower() = std::move(follow); }

int info(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << "usage: glimpse info FILE.h5 [FILE.h5 ...]\n"
                     "       glimpse info --follow RUN.h5 [--interval S] [--timeout S] [--until-ended]\n"
                     "Describes a Glimpse HDF5 file (checkpoint, trace, run log, episode):\n"
                     "its kind, version, configuration and every dataset with shape and dtype.\n"
                     "A run log whose writer was killed is reported dead, not running.\n"
                     "--follow follows a run log as the Training panel does (also across kills and\n"
                     "resumes), printing status and step changes, until it has finished (exit 0) or a\n"
                     "read fails (exit 1).\n";
        return args.empty() ? 2 : 0;
    }
    for (const auto& s : args)
        if (s == "--follow") {
            if (!follower())
                throw Error("--follow follows a run log with the Training panel's follower and needs a GUI build; "
                            "this glimpse was built headless (GLIMPSE_HEADLESS)");
            return follower()(args);
        }
    int rc = 0;
    for (const auto& path : args) {
        try {
            std::cout << describeH5(path);
        } catch (const std::exception& e) {
            std::cerr << "glimpse info: " << e.what() << "\n";
            rc = 1;
        }
    }
    return rc;
}

} // namespace glimpse::cli
