#include "app/cli/cli.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace glimpse::cli {

Args::Args(const std::vector<std::string>& args, const std::vector<std::string>& flags) {
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a.size() > 2 && a.rfind("--", 0) == 0) {
            auto eq = a.find('=');
            if (eq != std::string::npos) {
                values_[a.substr(0, eq)] = a.substr(eq + 1);
            } else if (std::find(flags.begin(), flags.end(), a) != flags.end()) {
                values_[a] = "1";
            } else {
                if (i + 1 >= args.size()) {   // reported by checkKnown or when read
                    missingValue_ = a;
                    values_[a] = "";
                } else {
                    values_[a] = args[++i];
                }
            }
        } else {
            positional_.push_back(a);
        }
    }
}

void Args::checkValue(const std::string& key) const {
    if (!missingValue_.empty() && key == missingValue_) throw UsageError(key + ": expected a value after it");
}

bool Args::has(const std::string& key) const { return values_.count(key) != 0; }

std::optional<std::string> Args::get(const std::string& key) const {
    checkValue(key);
    auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    return it->second;
}

std::string Args::get(const std::string& key, const std::string& def) const {
    auto v = get(key);
    return v ? *v : def;
}

double Args::getDouble(const std::string& key, double def) const {
    auto v = get(key);
    if (!v) return def;
    char* end = nullptr;
    double d = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0') throw Error(key + ": expected a number, got '" + *v + "'");
    return d;
}

long long Args::getInt(const std::string& key, long long def) const {
    auto v = get(key);
    if (!v) return def;
    char* end = nullptr;
    long long d = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0') throw Error(key + ": expected an integer, got '" + *v + "'");
    return d;
}

std::string Args::require(const std::string& key) const {
    auto v = get(key);
    if (!v) throw Error("missing required option " + key);
    return *v;
}

void Args::checkKnown(const std::vector<std::string>& known) const {
    for (const auto& kv : values_)
        if (std::find(known.begin(), known.end(), kv.first) == known.end())
            throw UsageError("unknown option " + kv.first);
    checkValue(missingValue_);
}

} // namespace glimpse::cli
