#pragma once
// Reading a trainer's JSON config (LETR, CoaT): every key optional, unknown keys and values of
// the wrong type are glimpse::Errors naming `where` (the file, or "config") and the key.
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace glimpse::train {

// Throws unless `j` is an object whose keys are all in `known`.
void checkKeys(const nlohmann::json& j, std::initializer_list<const char*> known, const std::string& where);

// Reads j[key] into `out` when the key is present. Strings and booleans must be of that type;
// integers must be JSON integers within int64 (and >= 0 for unsigned fields); floating-point
// fields take any number.
template <typename T>
void readKey(const nlohmann::json& j, const char* key, T& out, const std::string& where) {
    auto it = j.find(key);
    if (it == j.end()) return;
    bool ok;
    if constexpr (std::is_same_v<T, std::string>) ok = it->is_string();
    else if constexpr (std::is_same_v<T, bool>) ok = it->is_boolean();
    else if constexpr (std::is_integral_v<T>)
        ok = it->is_number_integer() &&
             !(it->is_number_unsigned() && it->template get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()));
    else ok = it->is_number();
    if (!ok) throw Error(where + ": \"" + key + "\" has the wrong type (" + std::string(it->type_name()) + ")");
    if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
        if (it->template get<int64_t>() < 0) throw Error(where + ": \"" + key + "\" must be >= 0");
    }
    out = it->template get<T>();
}

// `base` with every key of the object `overrides` set over it.
nlohmann::json overlay(nlohmann::json base, const nlohmann::json& overrides);

} // namespace glimpse::train
