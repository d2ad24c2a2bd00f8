#pragma once
// File-name helpers shared by the readers and writers that choose by extension.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>

namespace glimpse {

// The extension of `path` with its dot, in lower case ("photo.JPG" -> ".jpg"; "" when none).
inline std::string lowerExtension(const std::filesystem::path& path) {
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return ext;
}

} // namespace glimpse
