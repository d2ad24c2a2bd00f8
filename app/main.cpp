// glimpse: the headless subcommands (the command table, app/cli/commands.cpp) and the GUI
// (app/gui.cpp, no arguments or a file to open). Compiled with GLIMPSE_HEADLESS it is the CLI
// alone (docs/gpu.md): no GUI, no commands that need the GUI stack.
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "app/cli/command.h"
#include "app/cli/resource_path.h"
#include "core/data/mlsd_lines.h"
#include "core/util/threads.h"
#ifndef GLIMPSE_HEADLESS
#include "app/gui.h"
#endif

int main(int argc, char** argv) {
    glimpse::chooseBlasKernels(argv);   // may execute glimpse again with OPENBLAS_CORETYPE set
    glimpse::tuneAllocator();
    // The labeller of --data mlsd:LIST (core/data/mlsd_lines.h), "" when not installed.
    glimpse::data::setMlsdLabelCheckpoint(glimpse::cli::resourcePath("mlsd_tiny.h5"));
#ifndef GLIMPSE_HEADLESS
    glimpse::cli::addCommands(glimpse::cli::guiCommands());
    glimpse::cli::setRunLogFollower(glimpse::cli::followRunLog);
#endif
    if (argc > 1) {
        const std::string cmd = argv[1];
        if (cmd == "--help" || cmd == "-h" || cmd == "help") {
#ifdef GLIMPSE_HEADLESS
            std::cout << "usage: " << glimpse::cli::commandsUsage().substr(7) << "       glimpse --help | --version\n\n"
                      << "This glimpse was built headless (GLIMPSE_HEADLESS): commands only, no GUI.\n"
#else
            std::cout << "usage: glimpse [FILE] [GUI options]                          start the GUI\n"
                      << glimpse::cli::commandsUsage() << "       glimpse --help | --version\n\n"
                      << glimpse::app::guiUsage()
#endif
                      << "Run 'glimpse COMMAND --help' for a command's options.\n";
            return 0;
        }
        if (cmd == "--version" || cmd == "-v") {
            std::cout << "glimpse " << GLIMPSE_VERSION << "\n";
            const std::string allocator = glimpse::allocatorLibrary();
            if (!allocator.empty()) std::cout << "allocator: " << allocator << "\n";
            return 0;
        }
        bool handled = false;
        const int rc = glimpse::cli::runCommand(cmd, std::vector<std::string>(argv + 2, argv + argc), &handled);
        if (handled) return rc;
        // Not a command: a file to open, unless it looks like a mistyped command.
        if (cmd.rfind("-", 0) != 0 && !std::filesystem::exists(cmd) && cmd.find('.') == std::string::npos &&
            cmd.find('/') == std::string::npos) {
            std::cerr << "glimpse: unknown command '" << cmd << "' (glimpse --help lists them)\n";
            return 2;
        }
    }
#ifdef GLIMPSE_HEADLESS
    std::cerr << "glimpse: built headless (GLIMPSE_HEADLESS): no GUI; glimpse --help lists the commands\n";
    return 2;
#else
    return glimpse::app::runGui(argc, argv);
#endif
}
