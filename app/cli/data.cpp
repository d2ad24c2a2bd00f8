// glimpse data export --data SPEC --out DIR: writes a line dataset (e.g. a procedural set) as
// PNG images plus a Wireframe-form JSON, so it can be inspected and reused.
#include <iostream>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "core/data/open.h"
#include "core/data/wireframe.h"
#include "core/error.h"

namespace glimpse::cli {

namespace {
const char* kDataUsage =
    "usage: glimpse data export --data SPEC --out DIR [--name NAME] [--overlays]\n"
    "Writes the dataset SPEC (a Wireframe JSON file, a folder with train.json,\n"
    "procedural:COUNT[:SEED[:WxH[:SCENES]]], lsd:PHOTOS (a folder or .txt list of photos, labelled\n"
    "by LSD's long segments), mlsd:PHOTOS (labelled by M-LSD tiny; the labels are computed once and\n"
    "cached beside the list, LIST.mlsd.h5) or mix:SPEC+SPEC[+...]) to DIR/NAME.json (default NAME:\n"
    "dataset) and\n"
    "DIR/images/NNNNNN.png, in the Wireframe form that --data PATH.json reads back.\n"
    "--overlays also writes DIR/overlays/NNNNNN.png with the ground-truth segments in red.\n";
}

int dataExport(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << kDataUsage;
        return args.empty() ? 2 : 0;
    }
    Args a(args, {"--overlays"});
    try {
        a.checkKnown({"--data", "--out", "--name", "--overlays"});
        if (!a.has("--data") || !a.has("--out")) throw Error("missing --data or --out");
    } catch (const Error& e) {
        std::cerr << "glimpse data export: " << e.what() << "\n" << kDataUsage;
        return 2;
    }
    auto ds = data::openLineDataset(a.require("--data"));
    std::string path;
    {
        CountProgress progress("exported ", " images");
        path = data::exportLineDataset(*ds, a.require("--out"), a.get("--name", "dataset"), progress.fn(),
                                       a.has("--overlays"));
    }
    std::cout << "wrote " << path << " (" << ds->describe() << ")\n";
    return 0;
}

} // namespace glimpse::cli
