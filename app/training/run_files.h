#pragma once
// A run folder's loadable weights for the Training preview: model.h5 (written at the end) and
// checkpoint.h5 (written during training), those that exist, the newest first.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace glimpse::app {

inline std::vector<std::filesystem::path> newestRunWeights(const std::string& dir) {
    namespace fs = std::filesystem;
    std::vector<fs::path> found;
    for (const char* name : {"model.h5", "checkpoint.h5"})
        if (fs::exists(fs::path(dir) / name)) found.push_back(fs::path(dir) / name);
    std::stable_sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) {
        return fs::last_write_time(a) > fs::last_write_time(b);
    });
    return found;
}

} // namespace glimpse::app
