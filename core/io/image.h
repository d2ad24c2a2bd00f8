#pragma once
// Image files in and out (OpenCV imgcodecs).
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace glimpse {

// Images larger than this are refused (before decoding where the header can be read).
constexpr int kMaxImageSide = 20000;
constexpr long long kMaxImagePixels = 100'000'000;

// Loads any image OpenCV can decode as CV_8UC3 in RGB order:
//   * grayscale is replicated to three channels;
//   * 16-bit samples are scaled to 8 bits (v / 257); float samples are taken as 0..1;
//   * an alpha channel is composited onto white (transparent areas show as white);
//   * JPEG files honour their EXIF orientation (they are decoded with IMREAD_COLOR); every
//     other format is decoded with IMREAD_UNCHANGED.
// The width and height in the header of PNG, JPEG, BMP, WebP, TIFF, PNM and Sun raster files
// are checked before decoding, so an absurd header costs no allocation; other formats are
// checked after decoding. Throws glimpse::Error naming the file: missing, a directory, empty,
// unreadable, not an image or corrupt, too large (> kMaxImageSide on a side or
// > kMaxImagePixels), unsupported pixel type.
cv::Mat loadImageRGB(const std::string& path);

// The width and height an image file's header declares, without decoding it; {0, 0} when the
// format is not one of those listed above. Throws for missing or unreadable files.
cv::Size peekImageSize(const std::string& path);

// Writes `image` as PNG, atomically (temp file + rename). Accepts CV_8UC3 (RGB), CV_8UC1 (gray)
// and CV_8UC4 (RGBA). Throws glimpse::Error naming the file.
void saveImagePNG(const std::string& path, const cv::Mat& image);

// The same as JPEG (quality 1..100; an RGBA image loses its alpha). Throws glimpse::Error naming the file.
void saveImageJPEG(const std::string& path, const cv::Mat& image, int quality = 92);

// Whether the file name has the extension of an image format OpenCV decodes here (.png, .jpg,
// .jpeg, .bmp, .tif, .tiff, .webp, .ppm, .pgm, .pnm, .pbm, .sr, .ras; any case).
bool hasImageExtension(const std::string& path);

// The images of a folder (every file with an image extension, sorted by name) or of a list
// file (one path per line, relative to the list's folder unless absolute; blank lines and
// lines starting with '#' skipped). With mustExist, a listed path that is not a file is an
// error naming the list and its line. Throws glimpse::Error naming the folder or list when it
// is missing or unreadable, or yields no image.
std::vector<std::string> listImageFiles(const std::string& folderOrList, bool mustExist = false);

} // namespace glimpse
