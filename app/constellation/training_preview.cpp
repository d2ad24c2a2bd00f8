// The Training panel's preview of a ConstellationNet run: its newest weights (model.h5 at the
// end of the run, else the checkpoint.h5 training state) on 4 fixed base images of the run's
// data, each shown beside the last constellation module's cluster map (cells in their best
// cluster's colour, the palette of the inspector).
#include "app/constellation/view.h"
#include "app/family.h"
#include "app/training/run_files.h"

#include <algorithm>
#include <filesystem>

#include <opencv2/imgproc.hpp>

#include "core/data/fewshot.h"
#include "core/error.h"
#include "core/models/constellation/model.h"
#include "core/models/constellation/trace.h"
#include "core/models/constellation/train.h"
#include "core/train/state.h"

namespace glimpse::app {

namespace {

constexpr int kPreviewImages = 4;
constexpr int kTile = 80;

struct LoadedRun {
    std::shared_ptr<glimpse::constellation::ConstellationModel> model;
    std::string used;    // the file's name
    int64_t step = -1;   // -1: model.h5 (the end of the run)
};

// The run's training state as a model (the config from its meta, the base classes from the data).
LoadedRun loadCheckpoint(const std::string& path, const std::string& dataSpec) {
    auto st = train::loadTrainState(path, "constellation-train");
    if (!st.meta.contains("config")) throw Error(path + ": no training config in the checkpoint");
    const auto cfg = glimpse::constellation::ConstellationTrainConfig::fromJson(st.meta["config"], path);
    std::string spec = dataSpec;
    if (spec.empty() && st.meta.contains("data") && st.meta["data"].is_string()) spec = st.meta["data"].get<std::string>();
    if (spec.empty()) spec = "procedural";
    const int64_t size = cfg.model.value("image_size", int64_t(32));
    const auto splits = data::openFewShotDataset(spec, int(size));
    LoadedRun r;
    r.model = std::make_shared<glimpse::constellation::ConstellationModel>(cfg.modelConfig(splits.base->classNames(), size));
    train::loadModuleTensors(*r.model, glimpse::constellation::officialTensorNames(r.model->config(), st.model), path);
    r.step = st.meta.value("step", int64_t(0));
    return r;
}

// The newest of model.h5 / checkpoint.h5 that loads.
LoadedRun loadLatest(const std::string& dir, const std::string& dataSpec) {
    namespace fs = std::filesystem;
    const std::vector<fs::path> candidates = newestRunWeights(dir);
    std::string errors;
    for (const auto& p : candidates) {
        try {
            LoadedRun r = p.filename() == "model.h5" ? LoadedRun{glimpse::constellation::loadConstellation(p.string()), "", -1}
                                                     : loadCheckpoint(p.string(), dataSpec);
            r.used = p.filename().string();
            return r;
        } catch (const std::exception& e) {
            errors += std::string(errors.empty() ? "" : "; ") + e.what();
        }
    }
    throw Error(candidates.empty() ? "no model.h5 or checkpoint.h5 in " + dir + " yet" : errors);
}

} // namespace

TrainingPreview constellationTrainingPreview(const std::string& dir, const std::string& dataSpec) {
    LoadedRun run = loadLatest(dir, dataSpec);
    auto& model = *run.model;
    const auto mods = model.constellationModules();
    if (mods.empty()) throw Error(run.used + ": a ProtoNet baseline (no constellation modules, no cluster maps)");
    const auto splits = data::openFewShotDataset(dataSpec.empty() ? "procedural" : dataSpec, int(model.config().imageSize));
    const data::EpisodeSampler base(splits.base, "base");
    const int n = int(std::min<int64_t>(kPreviewImages, base.numClasses()));
    if (n == 0) throw Error("the base split of " + dataSpec + " is empty");
    // Side by side pairs (image | cluster map), two pairs per row.
    const int pairW = 2 * kTile + 4, gap = 8, cols = 2, rows = (n + cols - 1) / cols;
    cv::Mat canvas(rows * (kTile + gap) - gap, cols * (pairW + gap) - gap, CV_8UC3, cv::Scalar(40, 40, 40));
    std::string module;
    for (int i = 0; i < n; ++i) {
        const int64_t cls = int64_t(i) * base.numClasses() / n;   // evenly spread classes, their first image
        const auto sample = splits.base->get(base.classIndices(cls).front());
        const auto trace = glimpse::constellation::ConstellationTrace::capture(model, sample.image);
        const int m = trace.numModules() - 1;
        module = trace.module(m).name + " (" + std::to_string(trace.module(m).h) + "x" + std::to_string(trace.module(m).w) + ")";
        const torch::Tensor input = trace.image().contiguous();
        const cv::Mat rgb(int(input.size(0)), int(input.size(1)), CV_8UC3, input.data_ptr<uint8_t>());
        cv::Mat tile, map;
        cv::resize(rgb, tile, cv::Size(kTile, kTile), 0, 0, cv::INTER_LINEAR);
        cv::resize(clusterMapImage(trace.assignment(m), 1), map, cv::Size(kTile, kTile), 0, 0, cv::INTER_NEAREST);
        const int x = (i % cols) * (pairW + gap), y = (i / cols) * (kTile + gap);
        tile.copyTo(canvas(cv::Rect(x, y, kTile, kTile)));
        map.copyTo(canvas(cv::Rect(x + kTile + 4, y, kTile, kTile)));
    }
    TrainingPreview r;
    r.image = QImage(canvas.data, canvas.cols, canvas.rows, int(canvas.step), QImage::Format_RGB888).copy();
    const QString when = run.step < 0 ? QStringLiteral("end of run") : QStringLiteral("step %1").arg(run.step);
    r.caption = QStringLiteral("%1, %2: cluster maps of %3 beside %4 base images")
                    .arg(QString::fromStdString(run.used), when, QString::fromStdString(module))
                    .arg(n);
    return r;
}

} // namespace glimpse::app
