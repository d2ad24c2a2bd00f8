#pragma once
// Where shipped data files (demo checkpoints, trainer configs) are found; Qt-free, for the
// headless build too (app/resources.h wraps it for the GUI).
#include <string>

namespace glimpse::cli {

// The absolute path of resource `name` (e.g. "letr_demo.h5"), or "" when not installed.
// Looked up in $GLIMPSE_RESOURCES when that is set (then only there: tests and relocated
// installs point it at their own folder), else in <dir of the executable>/../share/glimpse,
// then the source tree's resources/.
std::string resourcePath(const std::string& name);

} // namespace glimpse::cli
