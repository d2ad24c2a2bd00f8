// glimpse eval letr: sAP / sF / APH / FH of a LETR checkpoint on a line dataset, one row per
// decoder layer (coarse 1..L, fine 1..L) and the LSD baseline (core/eval/letr_eval.h).
#include <algorithm>
#include <iostream>

#include <torch/torch.h>

#include "app/cli/cli.h"
#include "core/util/threads.h"
#include "core/data/open.h"
#include "core/error.h"
#include "core/eval/letr_eval.h"
#include "core/models/letr/model.h"

namespace glimpse::cli {

namespace {

const char* kEvalUsage =
    "usage: glimpse eval letr --checkpoint C.h5 --data D [--layers all|last] [--out eval.h5]\n"
    "                         [--max-images N] [--no-lsd] [--short-side S] [--threads T]\n"
    "Evaluates a LETR checkpoint on a line dataset (D: data.json, a dataset folder or\n"
    "procedural:COUNT[:SEED[:WxH]]) and prints sAP5/10/15, sF10/15, APH and FH (percent) for\n"
    "every decoder layer of both stages (--layers last: the last layer of each) and for the LSD\n"
    "baseline on the same images. --out writes the numbers and PR curves as an eval file (a\n"
    "finished run log, docs/formats.md). Progress goes to stderr.\n";

} // namespace

int evalLetr(const std::vector<std::string>& argv) {
    const bool help = std::find(argv.begin(), argv.end(), "--help") != argv.end() ||
                      std::find(argv.begin(), argv.end(), "-h") != argv.end();
    if (help) {
        std::cout << kEvalUsage;
        return 0;
    }
    Args a(argv, {"--no-lsd"});
    a.checkKnown({"--checkpoint", "--data", "--layers", "--out", "--max-images", "--no-lsd",
                  "--short-side", "--threads"});
    if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional().front() + "'");
    const std::string ckpt = a.require("--checkpoint");
    const std::string dataSpec = a.require("--data");
    const std::string layers = a.get("--layers", "all");
    if (layers != "all" && layers != "last") throw Error("--layers: expected all or last, got '" + layers + "'");
    if (a.has("--threads")) {
        const long long t = a.getInt("--threads", 1);
        if (t < 1) throw Error("--threads: expected a positive integer");
        glimpse::setComputeThreads(int(t));
    }
    eval::LetrEvalOptions opts;
    opts.allLayers = layers == "all";
    opts.lsd = !a.has("--no-lsd");
    opts.maxImages = a.getInt("--max-images", -1);
    if (a.has("--max-images") && opts.maxImages < 1) throw Error("--max-images: expected a positive integer");

    auto model = letr::loadLetr(ckpt);
    if (a.has("--short-side")) model->setResize(a.getInt("--short-side", 512), model->config().maxLongSide);
    auto data = data::openLineDataset(dataSpec);
    std::cerr << "glimpse eval: " << ckpt << " (" << model->config().backbone << ", "
              << model->config().numQueries << " queries, short side " << model->config().shortSide
              << ") on " << data->describe() << "\n";

    const auto result = eval::evaluateLetr(*model, *data, opts, [](int64_t done, int64_t total) {
        std::cerr << "\r  " << done << " / " << total << " images" << std::flush;
    });
    std::cerr << "\n";
    std::cout << "LETR " << ckpt << " on " << data->describe() << ": " << result.images << " images, "
              << "sAP over squared endpoint distance in a 128 x 128 frame\n"
              << eval::formatEvalTable(result);
    std::cerr << "glimpse eval: " << result.seconds << " s\n";
    if (a.has("--out")) {
        const std::string out = *a.get("--out");
        eval::saveEvalFile(result, out, {{"kind", "letr_eval"}, {"checkpoint", ckpt}, {"data", dataSpec},
                                         {"layers", layers}, {"model", model->config().toJson()}});
        std::cerr << "glimpse eval: wrote " << out << "\n";
    }
    return 0;
}

} // namespace glimpse::cli
