// The Training panel's preview of a CoaT run: its model.h5 (written when the run ends) on the
// first validation images of the run's dataset.
#include "app/family.h"

#include <filesystem>

#include <opencv2/imgproc.hpp>

#include "core/data/classification.h"
#include "core/error.h"
#include "core/models/coat/model.h"

namespace glimpse::app {

namespace {
constexpr int kCoatPreviewCount = 8;
}

// A grid of the first kCoatPreviewCount validation images, each framed green (right) or red
// (wrong), with the count in the caption.
TrainingPreview coatTrainingPreview(const std::string& dir, const std::string& dataSpec) {
    const std::string path = (std::filesystem::path(dir) / "model.h5").string();
    if (!std::filesystem::exists(path)) throw Error("model.h5 is written when the run ends");
    auto model = coat::loadCoat(path);
    torch::NoGradGuard ng;
    model->eval();
    const auto splits = data::openClassificationDataset(dataSpec);
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
    r.caption = QStringLiteral("model.h5: %1 / %2 validation images right").arg(correct).arg(n);
    return r;
}

} // namespace glimpse::app
