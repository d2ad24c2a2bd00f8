#include "app/domain_check.h"

#include <algorithm>

#include <opencv2/imgproc.hpp>

#include "app/async.h"

namespace glimpse::app {

DomainCheck::DomainCheck(QWidget* parent) : QLabel(parent) {
    setWordWrap(true);
    setTextFormat(Qt::RichText);
    setToolTip("What the model was trained on, and whether the shown image is far from it in size, colour,\n"
               "brightness or contrast (a model answers confidently even on images unlike its training data)");
    refreshText();
}

void DomainCheck::loadProfile(const QString& name, std::function<data::DomainProfile()> make) {
    const int gen = ++generation_;
    name_ = name;
    profile_.reset();
    error_.clear();
    refreshText();
    runAsync(this, std::move(make), [this, gen](Outcome<data::DomainProfile> r) {
        if (gen != generation_) return;   // another model meanwhile
        shownGeneration_ = gen;
        if (r.ok()) profile_ = std::move(r.value);
        else error_ = r.error;
        refreshText();
        Q_EMIT profileReady();
    });
}

void DomainCheck::check(const widgets::RgbImage& image, int originalW, int originalH) {
    if (image.empty()) return clear();
    // The statistics do not depend on the scale: measure a copy of at most 256 px a side.
    cv::Mat rgb(image.height, image.width, CV_8UC3, const_cast<uint8_t*>(image.rgb.data()));
    const double f = std::min(1.0, 256.0 / std::max(image.width, image.height));
    cv::Mat small;
    if (f < 1.0) cv::resize(rgb, small, cv::Size(), f, f, cv::INTER_AREA);
    else small = rgb;
    data::ImageStats s = data::imageStats(small);
    s.width = originalW > 0 ? originalW : image.width;
    s.height = originalH > 0 ? originalH : image.height;
    stats_ = s;
    refreshText();
}

void DomainCheck::clear() {
    stats_.reset();
    refreshText();
}

void DomainCheck::refreshText() {
    warnings_.clear();
    QString text;
    if (profile_) {
        text = "Trained on " + QString::fromStdString(profile_->describe()).toHtmlEscaped();
        if (stats_) {
            for (const auto& w : data::domainWarnings(*profile_, *stats_)) warnings_ << QString::fromStdString(w);
            if (warnings_.isEmpty()) {
                text += "<br>The image is within the training data's range.";
            } else {
                text += "<br><span style='color:#c0392b'><b>Far from the training data</b> (the answer means little): ";
                text += warnings_.join("; ").toHtmlEscaped() + "</span>";
            }
        }
    } else if (!error_.isEmpty()) {
        // The profile could not be had, so the training data is not known: say so, without
        // naming the data the model was tried against.
        text = "Training data not known: " + error_.toHtmlEscaped() + "; no domain check.";
    } else if (!name_.isEmpty()) {
        text = "Trained on " + name_.toHtmlEscaped() + " (measuring it ...)";
    } else {
        text = "No model.";
    }
    setText(text);
}

} // namespace glimpse::app
