#include <iostream>

#include "app/cli/cli.h"
#include "core/error.h"
#include "core/info.h"

namespace glimpse::cli {

int info(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << "usage: glimpse info FILE.h5 [FILE.h5 ...]\n"
                     "Describes a Glimpse HDF5 file (checkpoint, trace, run log, episode):\n"
                     "its kind, version, configuration and every dataset with shape and dtype.\n";
        return args.empty() ? 2 : 0;
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
