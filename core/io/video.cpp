#include "core/io/video.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include "core/error.h"
#include "core/io/image.h"
#include "core/util/path.h"

namespace glimpse {

bool isVideoFileName(const std::string& path) {
    const std::string ext = lowerExtension(path);
    for (const char* e : {".mp4", ".avi", ".mkv", ".mov", ".webm", ".m4v", ".mpg", ".mpeg", ".wmv",
                          ".ogv", ".mjpeg"})
        if (ext == e) return true;
    return false;
}

VideoReader::VideoReader(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw Error(path + ": no such file");
    if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not a video");
    if (std::filesystem::file_size(path, ec) == 0) throw Error(path + ": empty file, not a video");
    cap_ = std::make_unique<cv::VideoCapture>();
    bool opened = false;
    try {
        // Files only: FFmpeg, then OpenCV's own MJPEG reader. Not CAP_ANY, which also hands a
        // file that FFmpeg refuses to GStreamer and to the gPhoto2 camera backend (it probes
        // USB devices and leaks libusb device lists; fuzz finding, docs/fuzzing.md).
        opened = cap_->open(path, cv::CAP_FFMPEG) || cap_->open(path, cv::CAP_OPENCV_MJPEG);
    } catch (const cv::Exception& e) {
        throw Error(path + ": cannot open as video (" + e.what() + ")");
    }
    if (!opened || !cap_->isOpened())
        throw Error(path + ": not a video OpenCV can decode (corrupt, truncated or unsupported format)");
    const double n = cap_->get(cv::CAP_PROP_FRAME_COUNT);
    const double fps = cap_->get(cv::CAP_PROP_FPS);
    if (fps > 0 && fps < 1000) fps_ = fps;
    cv::Mat first = frame(0);   // proves the stream decodes; sets width/height
    width_ = first.cols;
    height_ = first.rows;
    frameCount_ = (n >= 1 && n < 1e9) ? int(n) : 1;
}

VideoReader::~VideoReader() = default;

cv::Mat VideoReader::frame(int index) {
    const std::string where = path_ + ": frame " + std::to_string(index);
    if (index < 0 || (frameCount_ > 0 && index >= frameCount_))
        throw Error(where + " out of range (the video has " + std::to_string(frameCount_) + " frames)");
    cv::Mat bgr;
    try {
        if (index != next_) {
            cap_->set(cv::CAP_PROP_POS_FRAMES, double(index));
            next_ = index;
        }
        if (!cap_->read(bgr) || bgr.empty()) {
            next_ = -1;   // position unknown: seek next time
            throw Error(where + ": cannot be decoded (the file may be truncated or corrupt)");
        }
    } catch (const cv::Exception& e) {
        next_ = -1;
        throw Error(where + ": decoding failed (" + e.what() + ")");
    }
    ++next_;
    if (bgr.cols > kMaxImageSide || bgr.rows > kMaxImageSide ||
        (long long)bgr.cols * bgr.rows > kMaxImagePixels)
        throw Error(where + ": frame of " + std::to_string(bgr.cols) + " x " + std::to_string(bgr.rows) +
                    " pixels is too large");
    cv::Mat rgb;
    if (bgr.depth() != CV_8U) throw Error(where + ": unsupported pixel type (not 8-bit)");
    if (bgr.channels() == 1) cv::cvtColor(bgr, rgb, cv::COLOR_GRAY2RGB);
    else if (bgr.channels() == 4) cv::cvtColor(bgr, rgb, cv::COLOR_BGRA2RGB);
    else cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    return rgb;
}

} // namespace glimpse
