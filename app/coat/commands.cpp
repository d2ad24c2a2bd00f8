// CoaT's headless commands (Qt-free; app/cli/command.h).
#include "app/cli/command.h"
#include "app/coat/cli.h"

namespace glimpse::cli {

std::vector<app::Command> coatCommands() {
    return {
        {"infer", "coat", "--checkpoint C.h5 --image I --out trace.h5", "classify with CoaT, top-5, write a trace",
            cli::inferCoat},
        {"bench", "coat", "[--variant V]", "CoaT images/s and attention query time", cli::benchCoat},
        {"train", "coat", "--data fashion-mnist|DIR --out RUN [--ablation pe]", "train CoaT", cli::trainCoat},
        {"eval", "coat", "--checkpoint C.h5 --data fashion-mnist|DIR [--split val|train] [--out R.h5]",
            "CoaT accuracy, top-5 and confusions on a labelled split", cli::evalCoat},
    };
}

} // namespace glimpse::cli
