#pragma once
// Reading JSON documents from files with errors that name the file (one helper for every
// config reader in core/ and app/).
#include <nlohmann/json.hpp>
#include <string>

namespace glimpse {

// Parses `text`; on malformed JSON throws glimpse::Error("<source>: <what> is not valid JSON (...)").
nlohmann::json parseJsonText(const std::string& text, const std::string& source, const std::string& what = "file");
// Reads and parses the file at `path`; throws glimpse::Error naming the file when it cannot be
// opened or is not valid JSON. `what` names the document in messages ("LETR config", ...).
nlohmann::json readJsonFile(const std::string& path, const std::string& what = "file");

} // namespace glimpse
