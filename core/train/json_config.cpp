#include "core/train/json_config.h"

#include <set>

namespace glimpse::train {

void checkKeys(const nlohmann::json& j, std::initializer_list<const char*> known, const std::string& where) {
    if (!j.is_object()) throw Error(where + ": expected a JSON object");
    const std::set<std::string> k(known.begin(), known.end());
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!k.count(it.key())) throw Error(where + ": unknown key \"" + it.key() + "\"");
}

nlohmann::json overlay(nlohmann::json base, const nlohmann::json& overrides) {
    for (auto it = overrides.begin(); it != overrides.end(); ++it) base[it.key()] = it.value();
    return base;
}

} // namespace glimpse::train
