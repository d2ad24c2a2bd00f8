#include "core/run_files.h"

#include <algorithm>
#include <filesystem>

namespace glimpse {

namespace fs = std::filesystem;

const std::vector<std::string>& runLogNames() {
    static const std::vector<std::string> names{"run.h5", "runlog.h5"};
    return names;
}

std::string findRunLog(const std::string& path) {
    std::error_code ec;
    const fs::path p(path);
    if (fs::is_regular_file(p, ec)) return path;
    const auto& names = runLogNames();
    fs::path folder;
    if (fs::is_directory(p, ec)) folder = p;
    else if (std::find(names.begin(), names.end(), p.filename().string()) != names.end()) folder = p.parent_path();
    else return path;
    for (const auto& name : names) {
        const fs::path candidate = folder.empty() ? fs::path(name) : folder / name;
        if (fs::is_regular_file(candidate, ec)) return candidate.string();
    }
    return path;
}

} // namespace glimpse
