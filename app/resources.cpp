#include "app/resources.h"

#include "app/cli/resource_path.h"

namespace glimpse::app {

QString resourceFile(const QString& name) {
    return QString::fromStdString(cli::resourcePath(name.toStdString()));
}

} // namespace glimpse::app
