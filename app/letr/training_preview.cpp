// The Training panel's preview of a LETR run: its newest model on the fixed validation image.
#include "app/family.h"

#include <filesystem>

#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/io/demo_image.h"
#include "core/models/letr/model.h"
#include "core/models/letr/trace.h"

namespace glimpse::app {

namespace {

constexpr float kPreviewThreshold = 0.5f;

// The newest LETR model file of a run directory that loadLetr accepts.
std::shared_ptr<letr::LetrModel> loadLatestModel(const std::string& dir, std::string& used) {
    namespace fs = std::filesystem;
    std::vector<fs::path> candidates;
    for (const char* name : {"model.h5", "checkpoint.h5"})
        if (fs::exists(fs::path(dir) / name)) candidates.push_back(fs::path(dir) / name);
    std::sort(candidates.begin(), candidates.end(), [](const fs::path& a, const fs::path& b) {
        return fs::last_write_time(a) > fs::last_write_time(b);
    });
    std::string errors;
    for (const auto& p : candidates) {
        try {
            auto m = letr::loadLetr(p.string());
            used = p.filename().string();
            return m;
        } catch (const std::exception& e) {
            errors += std::string(errors.empty() ? "" : "; ") + e.what();
        }
    }
    throw Error(candidates.empty() ? "no model.h5 or checkpoint.h5 in " + dir + " yet" : errors);
}

} // namespace

// Runs the model on the fixed preview image and draws its confident last-layer lines.
TrainingPreview letrTrainingPreview(const std::string& dir, const std::string&) {
    std::string used;
    auto model = loadLatestModel(dir, used);
    const cv::Mat image = makeDemoImage(320, 240, 7);   // the fixed validation image
    const letr::LetrTrace trace = letr::runLetr(*model, image);
    auto lines = trace.lines(trace.lastStage(), trace.lastLayer(), kPreviewThreshold);
    cv::Mat canvas = image.clone();
    for (const auto& l : lines)
        cv::line(canvas, cv::Point2f(l.x1 - 0.5f, l.y1 - 0.5f), cv::Point2f(l.x2 - 0.5f, l.y2 - 0.5f),
                 cv::Scalar(255, 40, 40), 1, cv::LINE_AA);
    TrainingPreview r;
    r.image = QImage(canvas.data, canvas.cols, canvas.rows, int(canvas.step), QImage::Format_RGB888).copy();
    r.caption = QStringLiteral("%1: %2 lines with score >= %3 (%4 %5)")
                    .arg(QString::fromStdString(used))
                    .arg(lines.size())
                    .arg(double(kPreviewThreshold))
                    .arg(letr::stageName(trace.lastStage()))
                    .arg(trace.lastLayer() + 1);
    return r;
}

} // namespace glimpse::app
