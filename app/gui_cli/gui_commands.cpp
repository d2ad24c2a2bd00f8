// The commands that need the GUI stack (Qt widgets, the Vulkan renderer): in the command table
// of GUI builds only (app/cli/commands.cpp).
#include "app/cli/cli.h"
#include "app/cli/command.h"
#include "app/gui_cli/bench_results.h"
#include "app/letr/cli.h"

namespace glimpse::cli {

std::vector<app::Command> guiCommands() {
    return {
        {"bench", "ui", "[--seconds S] [--repeat N]", "UI-thread event-loop latency (LETR, run follow, scrub)", benchUi},
        {"bench", "inspector", "[--reps R] [--kinds layer,entity]", "LETR inspector redraw times", benchInspector},
        {"bench", "results-gui", "--file R.h5 [--scroll-seconds S]", "Results dock open, sort, filter, thumbnail scroll",
         benchResultsGuiCommand},
    };
}

} // namespace glimpse::cli
