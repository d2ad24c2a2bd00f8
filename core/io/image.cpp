#include "core/io/image.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/io/atomic_file.h"
#include "core/util/path.h"

namespace glimpse {

namespace {

[[noreturn]] void raise(const std::string& path, const std::string& what) { throw Error(path + ": " + what); }

// Random access to the first bytes of a file, for header parsing.
class Bytes {
public:
    explicit Bytes(const std::string& path) : in_(path, std::ios::binary) {}
    bool ok() const { return bool(in_); }
    // Reads n bytes at off; false past the end.
    bool at(int64_t off, void* out, size_t n) {
        in_.clear();
        in_.seekg(off);
        return bool(in_.read(static_cast<char*>(out), std::streamsize(n)));
    }
    uint32_t be(int64_t off, int n) {
        unsigned char b[4] = {};
        if (!at(off, b, size_t(n))) return 0;
        uint32_t v = 0;
        for (int i = 0; i < n; ++i) v = (v << 8) | b[i];
        return v;
    }
    uint32_t le(int64_t off, int n) {
        unsigned char b[4] = {};
        if (!at(off, b, size_t(n))) return 0;
        uint32_t v = 0;
        for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[i];
        return v;
    }
    int get(int64_t off) {
        unsigned char c;
        return at(off, &c, 1) ? c : -1;
    }

private:
    std::ifstream in_;
};

struct Dim {
    int64_t w = 0, h = 0;
};

Dim jpegSize(Bytes& b) {
    int64_t pos = 2;
    for (int guard = 0; guard < 10000; ++guard) {
        if (b.get(pos) != 0xFF) return {};
        while (b.get(pos) == 0xFF) ++pos;   // fill bytes
        const int m = b.get(pos++);
        if (m < 0 || m == 0xD9 || m == 0xDA) return {};   // end of image / start of scan
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD8)) continue;   // markers without a segment
        const uint32_t len = b.be(pos, 2);
        if (len < 2) return {};
        const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
        if (sof) return {b.be(pos + 5, 2), b.be(pos + 3, 2)};
        pos += len;
    }
    return {};
}

Dim tiffSize(Bytes& b, bool little) {
    auto rd = [&](int64_t off, int n) { return little ? b.le(off, n) : b.be(off, n); };
    const int64_t ifd = rd(4, 4);
    const uint32_t count = rd(ifd, 2);
    int64_t w = 0, h = 0;
    for (uint32_t i = 0; i < count && i < 4096; ++i) {
        const int64_t e = ifd + 2 + 12 * int64_t(i);
        const uint32_t tag = rd(e, 2), type = rd(e + 2, 2);
        const uint32_t value = type == 3 ? rd(e + 8, 2) : rd(e + 8, 4);
        if (tag == 256) w = value;
        if (tag == 257) h = value;
    }
    return {w, h};
}

Dim pnmSize(Bytes& b) {
    int64_t pos = 2;
    int64_t vals[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
        int c = b.get(pos);
        while (c == '#' || std::isspace(c)) {   // whitespace and comment lines
            if (c == '#')
                while (c >= 0 && c != '\n') c = b.get(++pos);
            c = b.get(++pos);
        }
        if (c < '0' || c > '9') return {};
        while (c >= '0' && c <= '9') {
            vals[k] = std::min<int64_t>(vals[k] * 10 + (c - '0'), int64_t(1) << 40);
            c = b.get(++pos);
        }
    }
    return {vals[0], vals[1]};
}

Dim headerSize(Bytes& b) {
    unsigned char m[16] = {};
    b.at(0, m, sizeof m);
    if (!std::memcmp(m, "\x89PNG\r\n\x1a\n", 8)) return {b.be(16, 4), b.be(20, 4)};
    if (m[0] == 0xFF && m[1] == 0xD8) return jpegSize(b);
    if (m[0] == 'B' && m[1] == 'M') {
        if (b.le(14, 4) == 12) return {b.le(18, 2), b.le(20, 2)};
        return {std::abs(int64_t(int32_t(b.le(18, 4)))), std::abs(int64_t(int32_t(b.le(22, 4))))};
    }
    if (!std::memcmp(m, "RIFF", 4) && !std::memcmp(m + 8, "WEBP", 4)) {
        char fourcc[4] = {};
        b.at(12, fourcc, 4);
        if (!std::memcmp(fourcc, "VP8 ", 4)) return {b.le(26, 2) & 0x3FFF, b.le(28, 2) & 0x3FFF};
        if (!std::memcmp(fourcc, "VP8L", 4)) {
            const uint32_t v = b.le(21, 4);
            return {1 + (v & 0x3FFF), 1 + ((v >> 14) & 0x3FFF)};
        }
        if (!std::memcmp(fourcc, "VP8X", 4)) return {1 + int64_t(b.le(24, 3)), 1 + int64_t(b.le(27, 3))};
        return {};
    }
    if (!std::memcmp(m, "II*\0", 4)) return tiffSize(b, true);
    if (!std::memcmp(m, "MM\0*", 4)) return tiffSize(b, false);
    if (m[0] == 'P' && ((m[1] >= '1' && m[1] <= '7') || m[1] == 'f' || m[1] == 'F')) return pnmSize(b);
    if (m[0] == 0x59 && m[1] == 0xA6 && m[2] == 0x6A && m[3] == 0x95)
        return {b.be(4, 4), b.be(8, 4)};
    return {};
}

void checkSize(const std::string& path, int64_t w, int64_t h, const char* source) {
    if (w > kMaxImageSide || h > kMaxImageSide || w * h > kMaxImagePixels)
        raise(path, "image is too large: " + std::string(source) + " " + std::to_string(w) + " x " +
                        std::to_string(h) + " pixels; Glimpse opens images up to " + std::to_string(kMaxImageSide) +
                        " pixels on a side and " + std::to_string(kMaxImagePixels / 1000000) + " megapixels");
}

// Opens the file's header after checking it exists, is a regular readable file and is not empty.
Bytes openChecked(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
        raise(path, errno == ENOENT ? "file does not exist" : std::string("cannot open: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) raise(path, "is a directory, not an image");
    if (::access(path.c_str(), R_OK) != 0) raise(path, std::string("cannot open: ") + std::strerror(errno));
    if (st.st_size == 0) raise(path, "empty file (0 bytes), not an image");
    Bytes b(path);
    if (!b.ok()) raise(path, "cannot open the file");
    return b;
}

// Composites `rgba` (8-bit, colour channels + alpha last) onto white.
cv::Mat onWhite(const cv::Mat& src) {
    const int cn = src.channels();
    cv::Mat out(src.rows, src.cols, CV_8UC(cn - 1));
    for (int y = 0; y < src.rows; ++y) {
        const uchar* s = src.ptr<uchar>(y);
        uchar* d = out.ptr<uchar>(y);
        for (int x = 0; x < src.cols; ++x, s += cn, d += cn - 1) {
            const int a = s[cn - 1];
            for (int c = 0; c < cn - 1; ++c) d[c] = uchar((s[c] * a + 255 * (255 - a) + 127) / 255);
        }
    }
    return out;
}

} // namespace

cv::Size peekImageSize(const std::string& path) {
    Bytes b = openChecked(path);
    const Dim d = headerSize(b);
    return {int(std::min<int64_t>(d.w, INT32_MAX)), int(std::min<int64_t>(d.h, INT32_MAX))};
}

cv::Mat loadImageRGB(const std::string& path) {
    Bytes b = openChecked(path);
    const Dim declared = headerSize(b);
    checkSize(path, declared.w, declared.h, "its header declares");
    unsigned char magic[2] = {};
    b.at(0, magic, 2);
    const bool jpeg = magic[0] == 0xFF && magic[1] == 0xD8;

    cv::Mat m;
    try {
        m = cv::imread(path, jpeg ? cv::IMREAD_COLOR : cv::IMREAD_UNCHANGED);
    } catch (const cv::Exception& e) {
        raise(path, std::string("not an image or corrupt (") + e.what() + ")");
    }
    if (m.empty()) raise(path, "not an image or corrupt (OpenCV cannot decode it)");
    checkSize(path, m.cols, m.rows, "it is");

    switch (m.depth()) {
    case CV_8U: break;
    case CV_16U: m.convertTo(m, CV_8U, 1.0 / 257.0); break;
    case CV_32F:
    case CV_64F: m.convertTo(m, CV_8U, 255.0); break;
    default: raise(path, "unsupported pixel type (depth " + std::to_string(m.depth()) + ")");
    }
    cv::Mat rgb;
    switch (m.channels()) {
    case 1: cv::cvtColor(m, rgb, cv::COLOR_GRAY2RGB); break;
    case 2: cv::cvtColor(onWhite(m), rgb, cv::COLOR_GRAY2RGB); break;
    case 3: cv::cvtColor(m, rgb, cv::COLOR_BGR2RGB); break;
    case 4: cv::cvtColor(onWhite(m), rgb, cv::COLOR_BGR2RGB); break;
    default: raise(path, "unsupported image with " + std::to_string(m.channels()) + " channels");
    }
    return rgb;
}

namespace {
// Encodes `image` (8-bit gray, RGB or RGBA) with OpenCV's encoder for `ext` and writes it atomically.
void saveEncoded(const std::string& path, const cv::Mat& image, const char* ext, const char* format,
                 const std::vector<int>& params) {
    if (image.empty()) raise(path, "cannot save an empty image");
    if (image.depth() != CV_8U) raise(path, std::string("can only save 8-bit images as ") + format);
    cv::Mat bgr;
    switch (image.channels()) {
    case 1: bgr = image; break;
    case 3: cv::cvtColor(image, bgr, cv::COLOR_RGB2BGR); break;
    case 4: cv::cvtColor(image, bgr, cv::COLOR_RGBA2BGRA); break;
    default:
        raise(path, "cannot save an image with " + std::to_string(image.channels()) + " channels as " + format);
    }
    std::vector<uchar> bytes;
    try {
        if (!cv::imencode(ext, bgr, bytes, params)) raise(path, std::string(format) + " encoding failed");
    } catch (const cv::Exception& e) {
        raise(path, std::string(format) + " encoding failed: " + e.what());
    }
    writeBytesAtomically(path, bytes.data(), bytes.size());
}
} // namespace

void saveImagePNG(const std::string& path, const cv::Mat& image) { saveEncoded(path, image, ".png", "PNG", {}); }

void saveImageJPEG(const std::string& path, const cv::Mat& image, int quality) {
    if (quality < 1 || quality > 100) raise(path, "JPEG quality must be 1..100, got " + std::to_string(quality));
    cv::Mat noAlpha = image;
    if (!image.empty() && image.depth() == CV_8U && image.channels() == 4) cv::cvtColor(image, noAlpha, cv::COLOR_RGBA2RGB);
    saveEncoded(path, noAlpha, ".jpg", "JPEG", {cv::IMWRITE_JPEG_QUALITY, quality});
}

bool hasImageExtension(const std::string& path) {
    const std::string ext = lowerExtension(path);
    for (const char* e : {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pnm", ".pbm", ".sr", ".ras"})
        if (ext == e) return true;
    return false;
}

std::vector<std::string> listImageFiles(const std::string& source, bool mustExist) {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::vector<std::string> out;
    if (fs::is_directory(source, ec)) {
        for (const auto& e : fs::directory_iterator(source, ec))
            if (e.is_regular_file(ec) && hasImageExtension(e.path().string())) out.push_back(e.path().string());
        if (ec) raise(source, "cannot list the folder (" + ec.message() + ")");
        std::sort(out.begin(), out.end());
        if (out.empty()) raise(source, "no images in the folder");
        return out;
    }
    if (!fs::exists(source, ec)) raise(source, "no such folder or image list");
    std::ifstream in(source);
    if (!in) raise(source, "cannot open the image list");
    const fs::path base = fs::path(source).parent_path();
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        line.erase(0, line.find_first_not_of(" \t\r"));
        line.erase(line.find_last_not_of(" \t\r") + 1);
        if (line.empty() || line[0] == '#') continue;
        const fs::path p = fs::path(line).is_absolute() ? fs::path(line) : base / line;
        if (mustExist && !fs::is_regular_file(p, ec))
            raise(source, "line " + std::to_string(n) + ": no such image file '" + p.string() + "'");
        out.push_back(p.string());
    }
    if (out.empty()) raise(source, "the image list names no images");
    return out;
}

} // namespace glimpse
