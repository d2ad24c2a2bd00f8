// The Training panel's preview of a CoaT run: its newest weights - model.h5 (written when the
// run ends) or the checkpoint.h5 training state (written every checkpoint_every steps) - on
// the first validation images of the run's dataset.
#include "app/family.h"
#include "app/training/run_files.h"

#include <algorithm>
#include <filesystem>

#include <opencv2/imgproc.hpp>

#include "core/data/classification.h"
#include "core/error.h"
#include "core/models/coat/model.h"
#include "core/models/coat/train.h"
#include "core/train/state.h"

namespace glimpse::app {

namespace {
constexpr int kCoatPreviewCount = 8;

struct LoadedCoat {
    std::shared_ptr<coat::CoatModel> model;
    std::string used;   // "model.h5" or "checkpoint.h5 (step N)"
    std::string dataSpec;
};

// The run's training state as a model: the config from its meta, the classes from the data.
LoadedCoat loadCheckpoint(const std::string& path, const std::string& dataSpec) {
    auto st = train::loadTrainState(path, "coat-train");
    if (!st.meta.contains("config")) throw Error(path + ": no training config in the checkpoint");
    const auto cfg = coat::CoatTrainConfig::fromJson(st.meta["config"], path);
    std::string spec = dataSpec;
    if (spec.empty() && st.meta.contains("data") && st.meta["data"].is_string()) spec = st.meta["data"].get<std::string>();
    if (spec.empty()) throw Error(path + ": the checkpoint does not name its dataset");
    const auto splits = data::openClassificationDataset(spec, int(cfg.holdoutEvery));
    LoadedCoat r;
    r.model = std::make_shared<coat::CoatModel>(cfg.modelConfig(splits.train->classNames()), cfg.seed);
    train::loadModuleTensors(*r.model, st.model, path);
    r.used = "checkpoint.h5 (step " + std::to_string(st.meta.value("step", int64_t(0))) + ")";
    r.dataSpec = spec;
    return r;
}

// The newest of model.h5 / checkpoint.h5 that loads.
LoadedCoat loadLatest(const std::string& dir, const std::string& dataSpec) {
    namespace fs = std::filesystem;
    const std::vector<fs::path> candidates = newestRunWeights(dir);
    std::string errors;
    for (const auto& p : candidates) {
        try {
            if (p.filename() == "checkpoint.h5") return loadCheckpoint(p.string(), dataSpec);
            return LoadedCoat{coat::loadCoat(p.string()), "model.h5", dataSpec};
        } catch (const std::exception& e) {
            errors += std::string(errors.empty() ? "" : "; ") + e.what();
        }
    }
    throw Error(candidates.empty() ? "no model.h5 or checkpoint.h5 in " + dir + " yet" : errors);
}

} // namespace

// A grid of the first kCoatPreviewCount validation images, each framed green (right) or red
// (wrong), with the count in the caption.
TrainingPreview coatTrainingPreview(const std::string& dir, const std::string& dataSpec) {
    const LoadedCoat loaded = loadLatest(dir, dataSpec);
    auto model = loaded.model;
    torch::NoGradGuard ng;
    model->eval();
    const auto splits = data::openClassificationDataset(loaded.dataSpec);
    const auto& val = *splits.val;
    const int n = int(std::min<int64_t>(kCoatPreviewCount, val.size()));
    if (n == 0) throw Error("the validation split of " + dataSpec + " is empty");
    std::vector<torch::Tensor> xs;
    std::vector<cv::Mat> images;
    std::vector<int64_t> labels;
    for (int i = 0; i < n; ++i) {
        const auto s = val.get(i);
        images.push_back(data::toRgb(s.image));
        labels.push_back(s.label);
        xs.push_back(model->preprocess(images.back()).tensor);
    }
    const auto pred = model->forward(torch::stack(xs).to(model->device())).logits.argmax(1).cpu();
    const int cell = 40, cols = 4, rows = (n + cols - 1) / cols;
    cv::Mat canvas(rows * cell, cols * cell, CV_8UC3, cv::Scalar(40, 40, 40));
    int correct = 0;
    for (int i = 0; i < n; ++i) {
        const bool ok = pred[i].item<int64_t>() == labels[size_t(i)];
        correct += ok;
        cv::Mat tile;
        cv::resize(images[size_t(i)], tile, cv::Size(cell - 6, cell - 6), 0, 0, cv::INTER_AREA);
        const cv::Rect box((i % cols) * cell, (i / cols) * cell, cell, cell);
        canvas(box).setTo(ok ? cv::Scalar(40, 200, 60) : cv::Scalar(220, 40, 40));
        tile.copyTo(canvas(cv::Rect(box.x + 3, box.y + 3, cell - 6, cell - 6)));
    }
    TrainingPreview r;
    r.image = QImage(canvas.data, canvas.cols, canvas.rows, int(canvas.step), QImage::Format_RGB888).copy();
    r.caption = QStringLiteral("%1: %2 / %3 validation images right").arg(QString::fromStdString(loaded.used)).arg(correct).arg(n);
    return r;
}

} // namespace glimpse::app
