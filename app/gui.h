#pragma once
// The GUI entry point of `glimpse` (main() hands over when the first argument is no command).
#include <string>

namespace glimpse::app {

// The GUI's part of `glimpse --help`: its synopsis and options.
std::string guiUsage();
// Parses the GUI options, opens the main window and runs the event loop; returns the exit code
// (2 for bad options, before any window is made).
int runGui(int argc, char** argv);

} // namespace glimpse::app
