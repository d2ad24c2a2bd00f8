#include "core/eval/lsd.h"

#include <algorithm>

#include <opencv2/imgproc.hpp>

#include "core/error.h"

namespace glimpse::eval {

std::vector<ScoredLine> detectLsd(const cv::Mat& image) {
    if (image.empty()) throw Error("LSD: empty image");
    if (image.depth() != CV_8U || (image.channels() != 1 && image.channels() != 3))
        throw Error("LSD: expected an 8-bit gray or RGB image");
    cv::Mat gray;
    if (image.channels() == 3) cv::cvtColor(image, gray, cv::COLOR_RGB2GRAY);
    else gray = image;
    cv::Ptr<cv::LineSegmentDetector> lsd = cv::createLineSegmentDetector(cv::LSD_REFINE_ADV);
    std::vector<cv::Vec4f> segs;
    std::vector<double> width, prec, nfa;
    lsd->detect(gray, segs, width, prec, nfa);
    std::vector<ScoredLine> out;
    out.reserve(segs.size());
    for (size_t i = 0; i < segs.size(); ++i) {
        ScoredLine l;
        // OpenCV reports endpoints in pixel-centre coordinates; ours put centres at +0.5.
        l.x1 = segs[i][0] + 0.5f;
        l.y1 = segs[i][1] + 0.5f;
        l.x2 = segs[i][2] + 0.5f;
        l.y2 = segs[i][3] + 0.5f;
        l.score = i < nfa.size() ? float(nfa[i]) : 0.f;
        out.push_back(l);
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const ScoredLine& a, const ScoredLine& b) { return a.score > b.score; });
    return out;
}

} // namespace glimpse::eval
