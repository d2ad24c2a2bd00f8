#include "app/cli/resource_path.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#ifndef GLIMPSE_RESOURCES_DIR
#define GLIMPSE_RESOURCES_DIR ""
#endif

namespace glimpse::cli {

namespace fs = std::filesystem;

std::string resourcePath(const std::string& name) {
    std::vector<fs::path> dirs;
    const char* env = std::getenv("GLIMPSE_RESOURCES");
    if (env && *env) {
        dirs.emplace_back(env);
    } else {
        std::error_code ec;
        const fs::path exe = fs::canonical("/proc/self/exe", ec);
        if (!ec) dirs.push_back(exe.parent_path() / ".." / "share" / "glimpse");
        if (*GLIMPSE_RESOURCES_DIR) dirs.emplace_back(GLIMPSE_RESOURCES_DIR);
    }
    for (const auto& d : dirs) {
        std::error_code ec;
        const fs::path f = d / name;
        if (fs::is_regular_file(f, ec)) return fs::absolute(f, ec).lexically_normal().string();
    }
    return {};
}

} // namespace glimpse::cli
