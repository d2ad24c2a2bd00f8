#pragma once
// How far an input image is from a classifier's training data: a few plain statistics of
// images (size, colour, brightness, contrast), a profile of them over a sample of the training
// set, and the ways an input falls outside it. A model trained on 28x28 grayscale clothes
// still answers "Sandal p 0.8" for a photo of fruit; this says, next to the answer, that the
// photo is nothing like what the model saw (the panels of CoaT and ConstellationNet show it).
//
// Statistics of an image (8-bit, grayscale or RGB; values in 0..1):
//   chroma      mean over pixels of (max(R,G,B) - min(R,G,B)) / 255   (0 for grayscale)
//   brightness  mean luminance (0.299 R + 0.587 G + 0.114 B) / 255
//   contrast    standard deviation of the luminance / 255
// An input is out of the domain when (domainWarnings):
//   size        its shorter side is over 4x the largest, or under half the smallest, training side
//   colour      the training images are grayscale (chroma at most 0.02) and it has chroma over 0.05,
//               or its chroma is over the training mean + 4 standard deviations (and 0.05)
//   brightness, contrast  more than 3 standard deviations from the training mean (and 0.05 away)
#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace glimpse::data {

class ClassificationDataset;

struct ImageStats {
    int width = 0, height = 0;
    double chroma = 0, brightness = 0, contrast = 0;
};

// Throws glimpse::Error for an empty image or one that is not CV_8UC1 / CV_8UC3.
ImageStats imageStats(const cv::Mat& image);

struct DomainProfile {
    std::string data;        // the dataset's name or spec ("fashion-mnist")
    int64_t samples = 0;
    int minSide = 0, maxSide = 0;           // shorter sides of the images
    int typicalWidth = 0, typicalHeight = 0;   // the first sample's size
    double chromaMean = 0, chromaStd = 0, chromaMax = 0;
    double brightnessMean = 0, brightnessStd = 0;
    double contrastMean = 0, contrastStd = 0;
    bool grayscale() const { return chromaMax <= 0.02; }
    // "fashion-mnist: 28x28, grayscale, brightness 0.29 +- 0.09, contrast 0.35 +- 0.06 (500 images)"
    std::string describe() const;
};

// The profile of up to `maxSamples` images of `dataset`, spread evenly over it. Throws
// glimpse::Error for an empty dataset.
DomainProfile profileImages(const ClassificationDataset& dataset, const std::string& name, int64_t maxSamples = 500);
DomainProfile profileImages(const std::vector<cv::Mat>& images, const std::string& name);

// One sentence per way `input` falls outside `profile` (rules above); empty when it does not.
std::vector<std::string> domainWarnings(const DomainProfile& profile, const ImageStats& input);

} // namespace glimpse::data
