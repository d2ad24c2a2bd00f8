// glimpse eval coat: accuracy, top-5 accuracy and the most confused classes of a CoaT checkpoint
// on a labelled split (Fashion-MNIST or a class-folder dataset), with --out a results file
// holding every image's label, top-5 and probability of the label (issue 53).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <optional>

#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "app/cli/results_cli.h"
#include "app/coat/cli.h"
#include "core/data/classification.h"
#include "core/error.h"
#include "core/util/autocast.h"
#include "core/models/coat/model.h"
#include "core/models/coat/train.h"
#include "core/results/results.h"
#include "core/train/control.h"
#include "core/util/threads.h"

namespace glimpse::cli {

namespace {

const char* kEvalCoatUsage =
    "usage: glimpse eval coat --checkpoint C.h5 --data fashion-mnist|fashion-mnist:DIR|DIR [--split val|train]\n"
    "                         [--max-images N] [--batch B] [--out R.h5] [--threads T]\n"
    "                         [--precision fp32|bf16|int8|auto]\n"
    "Classifies every image of a labelled split (default val: Fashion-MNIST's t10k images, a class\n"
    "folder's val/ or test/ folder or its held-out images) with a CoaT checkpoint and prints the\n"
    "accuracy, the top-5 accuracy and the most confused class pairs. --max-images N evaluates a\n"
    "fixed random subset of N images (the trainer's validation order). --out writes a results\n"
    "file (glimpse.results, docs/formats.md) with every image's source, label, top-5 and the\n"
    "probability of its label, written as the eval goes; Ctrl-C stops it with the images done.\n"
    "--precision (docs/performance.md): fp32 (default, exact) or bf16: the linear layers and\n"
    "attention products in bfloat16 (CPUs with AVX512-BF16 or AMX), or int8: the MLPs' linear layers as\n"
    "int8 products (auto: bf16 where the CPU has it, else int8), to see whether they keep the\n"
    "float32 top-1 on the split.\n";

} // namespace

// Prints the (at most 5) most frequent off-diagonal cells of the K x K confusion matrix c
// (row: the label, column: the prediction), the most frequent first.
static void printMostConfused(const int64_t* c, int64_t K, const std::vector<std::string>& names) {
    std::vector<std::pair<int64_t, int64_t>> cells;
    for (int64_t x = 0; x < K; ++x)
        for (int64_t y = 0; y < K; ++y)
            if (x != y && c[x * K + y] > 0) cells.push_back({c[x * K + y], x * K + y});
    std::sort(cells.begin(), cells.end(), [](const auto& u, const auto& v) { return u.first > v.first; });
    for (size_t k = 0; k < cells.size() && k < 5; ++k)
        std::printf("  confused: %s as %s (%lld)\n", names[size_t(cells[k].second / K)].c_str(),
                    names[size_t(cells[k].second % K)].c_str(), (long long)cells[k].first);
}

int evalCoat(const std::vector<std::string>& argv) {
    if (std::find(argv.begin(), argv.end(), "--help") != argv.end() || std::find(argv.begin(), argv.end(), "-h") != argv.end()) {
        std::cout << kEvalCoatUsage;
        return 0;
    }
    Args a(argv);
    a.checkKnown({"--checkpoint", "--data", "--split", "--max-images", "--batch", "--out", "--threads", "--precision"});
    if (!a.positional().empty()) throw UsageError("unexpected argument '" + a.positional().front() + "'");
    const std::string ckpt = a.require("--checkpoint");
    const std::string spec = a.require("--data");
    const std::string split = a.get("--split", "val");
    if (split != "val" && split != "train") throw UsageError("--split: expected val or train, got '" + split + "'");
    const long long maxImages = a.getInt("--max-images", -1);
    if (a.has("--max-images") && maxImages < 1) throw UsageError("--max-images: expected a positive integer");
    const long long batch = a.getInt("--batch", 64);
    if (batch < 1) throw UsageError("--batch: expected a positive integer");
    if (a.has("--threads")) {
        const long long t = a.getInt("--threads", 1);
        if (t < 1) throw UsageError("--threads: expected a positive integer");
        glimpse::setComputeThreads(int(t));
    }
    if (a.has("--out")) checkOutputFolder(*a.get("--out"), "--out");

    const torch::ScalarType precision = parsePrecision(a.get("--precision", "fp32"), torch::Device(torch::kCPU),
                                                       "--precision", /*int8LinearLayers=*/true);
    auto model = coat::loadCoat(ckpt);
    auto splits = data::openClassificationDataset(spec);
    const data::ClassificationDataset& ds = split == "train" ? *splits.train : *splits.val;
    const int64_t K = model->config().numClasses;
    if (ds.numClasses() != K)
        throw Error(spec + " has " + std::to_string(ds.numClasses()) + " classes, the checkpoint " + ckpt + " " +
                    std::to_string(K));
    std::vector<std::string> names = model->config().classNames;
    if (int64_t(names.size()) != K) names = ds.classNames();
    const int64_t total = maxImages > 0 ? std::min<int64_t>(maxImages, ds.size()) : ds.size();
    std::cerr << "glimpse eval coat: " << ckpt << " (" << model->config().variant << ", " << K << " classes, "
              << model->config().imageSize << "x" << model->config().imageSize << ") on " << ds.describe() << ", "
              << total << " images\n";

    // The image file of each item (class folders); none for Fashion-MNIST.
    const auto* folder = dynamic_cast<const data::ClassFolderDataset*>(&ds);
    std::unique_ptr<results::ResultsWriter> writer;
    int64_t top5Correct = 0, done = 0;
    train::Control control;
    if (a.has("--out")) {
        results::ResultsHeader h;
        h.type = results::ResultsType::Classification;
        h.family = "coat";
        h.command = commandLine("glimpse eval coat", argv);
        h.checkpoint = ckpt;
        h.source.spec = spec;
        h.source.split = split;
        h.config = {{"variant", model->config().variant}, {"image_size", model->config().imageSize},
                    {"max_images", maxImages}, {"batch", batch}, {"precision", precisionName(precision)}};
        results::WriterOptions wo;
        wo.expectedSamples = total;
        wo.flushEvery = 256;
        writer = results::ResultsWriter::createClassification(*a.get("--out"), h, names, wo);
    }
    auto onSample = [&](int64_t index, int64_t label, int64_t pred, const torch::Tensor& probs) {
        const float* p = probs.data_ptr<float>();
        // The prediction the accuracy counts first, then the next best classes.
        std::vector<int64_t> order(static_cast<size_t>(K));
        std::iota(order.begin(), order.end(), int64_t(0));
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return p[x] > p[y]; });
        results::ClassSampleIn s;
        s.index = index;
        s.label = label;
        s.top5.push_back(pred);
        for (int64_t c : order)
            if (c != pred && s.top5.size() < 5) s.top5.push_back(c);
        for (int64_t c : s.top5) s.top5Prob.push_back(p[c]);
        s.labelProb = p[label];
        top5Correct += std::find(s.top5.begin(), s.top5.end(), label) != s.top5.end();
        ++done;
        if (writer) {
            if (folder) s.path = folder->items()[size_t(index)].path;
            writer->add(s);
        }
    };
    coat::ClassEval r;
    {
        CountProgress progress("  ", " images");
        std::optional<StopOnInterrupt> interrupt;
        interrupt.emplace(control);
        auto fn = progress.fn();
        r = coat::evaluateClassifier(
            *model, ds, maxImages > 0 ? total : 0, batch, true,
            [&](int64_t index, int64_t label, int64_t pred, const torch::Tensor& probs) {
                onSample(index, label, pred, probs);
                fn(done, total);
            },
            [&] { return !control.checkpoint(); }, precision);
    }
    const bool stopped = r.count < total;
    const auto conf = r.confusion.contiguous();
    const int64_t* c = conf.data_ptr<int64_t>();
    int64_t correct = 0;
    for (int64_t k = 0; k < K; ++k) correct += c[k * K + k];
    std::printf("CoaT %s on %s: %lld images%s, %s\n", ckpt.c_str(), ds.describe().c_str(), (long long)r.count,
                stopped ? " (stopped)" : "", precisionName(precision));
    std::printf("accuracy %.2f%% (%lld of %lld), top-5 %.2f%%, mean cross-entropy %.4f\n", 100 * r.acc,
                (long long)correct, (long long)r.count, r.count ? 100.0 * double(top5Correct) / double(r.count) : 0.0,
                r.loss);
    printMostConfused(c, K, names);
    if (writer) {
        results::ClassSummary s;
        s.classNames = names;
        s.samples = r.count;
        s.correct = correct;
        s.top5Correct = top5Correct;
        s.accuracy = r.acc;
        s.top5Accuracy = r.count ? double(top5Correct) / double(r.count) : 0.0;
        s.confusion.assign(c, c + K * K);
        writer->finish(s, stopped ? results::Status::Stopped : results::Status::Complete);
        std::cerr << "glimpse eval coat: wrote " << *a.get("--out") << "\n";
    }
    return 0;
}

} // namespace glimpse::cli
