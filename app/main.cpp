// glimpse: the headless subcommands (the command table, app/cli/commands.cpp) and the GUI
// (app/gui.cpp, no arguments or a file to open).
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "app/gui.h"

int main(int argc, char** argv) {
    if (argc > 1) {
        const std::string cmd = argv[1];
        if (cmd == "--help" || cmd == "-h" || cmd == "help") {
            std::cout << "usage: glimpse [FILE] [GUI options]                          start the GUI\n"
                      << glimpse::cli::commandsUsage() << "       glimpse --help | --version\n\n"
                      << glimpse::app::guiUsage() << "Run 'glimpse COMMAND --help' for a command's options.\n";
            return 0;
        }
        if (cmd == "--version" || cmd == "-v") {
            std::cout << "glimpse " << GLIMPSE_VERSION << "\n";
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
    return glimpse::app::runGui(argc, argv);
}
