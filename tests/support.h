#pragma once
// Small helpers shared by the test suites.
#include <initializer_list>
#include <string>

#include <QString>
#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/error.h"

namespace glimpse::testing {

// The message of the glimpse::Error that f() throws, or "<no error>".
template <typename F>
std::string errorOf(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

// Same as errorOf, as a QString, empty when nothing was thrown.
template <typename F>
QString qErrorOf(F&& f) {
    const std::string e = errorOf(std::forward<F>(f));
    return e == "<no error>" ? QString() : QString::fromStdString(e);
}

// True when every word occurs in s.
inline bool contains(const std::string& s, std::initializer_list<std::string> words) {
    for (const auto& w : words)
        if (s.find(w) == std::string::npos) return false;
    return true;
}

// A deterministic noise image, CV_8UC3.
inline cv::Mat randomImage(int h, int w, uint64_t seed) {
    cv::Mat m(h, w, CV_8UC3);
    cv::RNG rng(seed);
    rng.fill(m, cv::RNG::UNIFORM, 0, 256);
    return m;
}

inline double maxDiff(const torch::Tensor& a, const torch::Tensor& b) {
    return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

} // namespace glimpse::testing
