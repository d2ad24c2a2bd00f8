#pragma once
// Where shipped data files (demo checkpoints, trainer configs) are found.
#include <QString>

namespace glimpse::app {

// The absolute path of resource `name` (e.g. "letr_demo.h5"), or empty when not installed.
// Looked up in $GLIMPSE_RESOURCES when that is set (then only there: tests and relocated
// installs point it at their own folder), else in <exe dir>/../share/glimpse, then the source
// tree's resources/. Usable before a QApplication exists.
QString resourceFile(const QString& name);

} // namespace glimpse::app
