#pragma once
// Video files in (OpenCV videoio): frame count, random access to frames as RGB images.
// Not thread-safe: one reader per thread, or serialize calls.
#include <memory>
#include <string>

#include <opencv2/core.hpp>

namespace cv {
class VideoCapture;
}

namespace glimpse {

// True for file names with a common video extension (.mp4 .avi .mkv .mov .webm .m4v .mpg
// .mpeg .wmv .ogv .mjpeg), case-insensitive; decides whether the GUI opens a file as video.
bool isVideoFileName(const std::string& path);

class VideoReader {
public:
    // Opens `path` and decodes its first frame. Throws glimpse::Error naming the file when it
    // is missing, not a video OpenCV can decode (corrupt, truncated, unsupported codec), has
    // no frames, or frames larger than kMaxImageSide / kMaxImagePixels (core/io/image.h).
    explicit VideoReader(const std::string& path);
    ~VideoReader();
    VideoReader(const VideoReader&) = delete;
    VideoReader& operator=(const VideoReader&) = delete;

    const std::string& path() const { return path_; }
    // Number of frames (the container's count; at least 1).
    int frameCount() const { return frameCount_; }
    double fps() const { return fps_; }          // 25 when the file does not say
    int width() const { return width_; }
    int height() const { return height_; }

    // Frame `index` (0-based) as CV_8UC3 RGB. Sequential reads are fast; other indices seek.
    // Throws glimpse::Error naming the file and the frame when it is out of range or cannot be
    // decoded (e.g. the file is truncated there).
    cv::Mat frame(int index);

private:
    std::string path_;
    std::unique_ptr<cv::VideoCapture> cap_;
    int frameCount_ = 0;
    double fps_ = 25.0;
    int width_ = 0, height_ = 0;
    int next_ = 0;   // index of the frame the next read() returns
};

} // namespace glimpse
