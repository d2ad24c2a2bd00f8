#include "core/data/domain.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <opencv2/imgproc.hpp>

#include "core/data/classification.h"
#include "core/error.h"

namespace glimpse::data {

namespace {

std::string fmt(const char* f, double a, double b = 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, f, a, b);
    return buf;
}

void meanStd(const std::vector<double>& v, double& mean, double& sd) {
    mean = sd = 0;
    if (v.empty()) return;
    for (double x : v) mean += x;
    mean /= double(v.size());
    for (double x : v) sd += (x - mean) * (x - mean);
    sd = std::sqrt(sd / double(v.size()));
}

} // namespace

ImageStats imageStats(const cv::Mat& image) {
    if (image.empty()) throw Error("image statistics: empty image");
    if (image.type() != CV_8UC1 && image.type() != CV_8UC3)
        throw Error("image statistics: expected an 8-bit grayscale or RGB image");
    ImageStats s;
    s.width = image.cols;
    s.height = image.rows;
    cv::Mat lum;
    if (image.channels() == 1) {
        image.convertTo(lum, CV_64F, 1.0 / 255.0);
    } else {
        std::vector<cv::Mat> ch;
        cv::split(image, ch);   // R, G, B
        cv::Mat r, g, b;
        ch[0].convertTo(r, CV_64F, 1.0 / 255.0);
        ch[1].convertTo(g, CV_64F, 1.0 / 255.0);
        ch[2].convertTo(b, CV_64F, 1.0 / 255.0);
        lum = 0.299 * r + 0.587 * g + 0.114 * b;
        cv::Mat mx, mn;
        cv::max(ch[0], ch[1], mx);
        cv::max(mx, ch[2], mx);
        cv::min(ch[0], ch[1], mn);
        cv::min(mn, ch[2], mn);
        cv::Mat spread;
        cv::subtract(mx, mn, spread);
        s.chroma = cv::mean(spread)[0] / 255.0;
    }
    cv::Scalar mean, sd;
    cv::meanStdDev(lum, mean, sd);
    s.brightness = mean[0];
    s.contrast = sd[0];
    return s;
}

DomainProfile profileImages(const std::vector<cv::Mat>& images, const std::string& name) {
    if (images.empty()) throw Error("domain profile of " + name + ": no images");
    DomainProfile p;
    p.data = name;
    p.samples = int64_t(images.size());
    std::vector<double> chroma, bright, contrast;
    p.minSide = 1 << 30;
    for (const cv::Mat& im : images) {
        const ImageStats s = imageStats(im);
        if (chroma.empty()) {
            p.typicalWidth = s.width;
            p.typicalHeight = s.height;
        }
        const int side = std::min(s.width, s.height);
        p.minSide = std::min(p.minSide, side);
        p.maxSide = std::max(p.maxSide, side);
        chroma.push_back(s.chroma);
        bright.push_back(s.brightness);
        contrast.push_back(s.contrast);
        p.chromaMax = std::max(p.chromaMax, s.chroma);
    }
    meanStd(chroma, p.chromaMean, p.chromaStd);
    meanStd(bright, p.brightnessMean, p.brightnessStd);
    meanStd(contrast, p.contrastMean, p.contrastStd);
    return p;
}

DomainProfile profileImages(const ClassificationDataset& dataset, const std::string& name, int64_t maxSamples) {
    const int64_t n = dataset.size();
    if (n < 1) throw Error("domain profile of " + name + ": the dataset is empty");
    const int64_t k = std::clamp<int64_t>(maxSamples, 1, n);
    std::vector<cv::Mat> images;
    images.reserve(size_t(k));
    for (int64_t i = 0; i < k; ++i) images.push_back(dataset.get(i * n / k).image);   // spread over the set
    return profileImages(images, name);
}

std::string DomainProfile::describe() const {
    std::string size = minSide == maxSide ? std::to_string(typicalWidth) + "x" + std::to_string(typicalHeight)
                                          : "sides " + std::to_string(minSide) + ".." + std::to_string(maxSide) + " px";
    return data + ": " + size + ", " + (grayscale() ? std::string("grayscale") : fmt("colour (chroma %.2f)", chromaMean)) +
           fmt(", brightness %.2f +- %.2f", brightnessMean, brightnessStd) +
           fmt(", contrast %.2f +- %.2f", contrastMean, contrastStd) + " (" + std::to_string(samples) + " images)";
}

std::vector<std::string> domainWarnings(const DomainProfile& p, const ImageStats& s) {
    std::vector<std::string> out;
    const int side = std::min(s.width, s.height);
    const std::string trainSize = p.minSide == p.maxSide ? std::to_string(p.typicalWidth) + "x" + std::to_string(p.typicalHeight)
                                                        : std::to_string(p.minSide) + "-" + std::to_string(p.maxSide) + " px";
    if (p.maxSide > 0 && side > 4 * p.maxSide)
        out.push_back("size: " + std::to_string(s.width) + "x" + std::to_string(s.height) + ", the training images are " +
                      trainSize + fmt(" (%.0fx smaller)", double(side) / double(p.maxSide)));
    else if (p.minSide > 0 && 2 * side < p.minSide)
        out.push_back("size: " + std::to_string(s.width) + "x" + std::to_string(s.height) + ", the training images are " +
                      trainSize);
    if (p.grayscale() && s.chroma > 0.05)
        out.push_back(fmt("colour: a colour image (chroma %.2f), the training images are grayscale", s.chroma));
    else if (!p.grayscale() && s.chroma > std::max(p.chromaMean + 4 * p.chromaStd, 0.05))
        out.push_back(fmt("colour: chroma %.2f, the training images have %.2f", s.chroma, p.chromaMean) +
                      fmt(" +- %.2f", p.chromaStd));
    auto far = [](double v, double mean, double sd) { return std::abs(v - mean) > std::max(3 * sd, 0.05); };
    if (far(s.brightness, p.brightnessMean, p.brightnessStd))
        out.push_back(fmt("brightness %.2f, the training images have %.2f", s.brightness, p.brightnessMean) +
                      fmt(" +- %.2f", p.brightnessStd));
    if (far(s.contrast, p.contrastMean, p.contrastStd))
        out.push_back(fmt("contrast %.2f, the training images have %.2f", s.contrast, p.contrastMean) +
                      fmt(" +- %.2f", p.contrastStd));
    return out;
}

} // namespace glimpse::data
