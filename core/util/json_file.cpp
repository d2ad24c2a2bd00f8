#include "core/util/json_file.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace glimpse {

nlohmann::json parseJsonText(const std::string& text, const std::string& source, const std::string& what) {
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw Error(source + ": " + what + " is not valid JSON (" + e.what() + ")");
    }
}

nlohmann::json readJsonFile(const std::string& path, const std::string& what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open the " + what);
    std::stringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw Error(path + ": cannot read the " + what);
    return parseJsonText(ss.str(), path, what);
}

} // namespace glimpse
