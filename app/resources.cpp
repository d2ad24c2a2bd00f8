#include "app/resources.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QStringList>

#include <cstring>

#ifndef GLIMPSE_RESOURCES_DIR
#define GLIMPSE_RESOURCES_DIR ""
#endif

namespace glimpse::app {

QString resourceFile(const QString& name) {
    QStringList dirs;
    const QString env = qEnvironmentVariable("GLIMPSE_RESOURCES");
    if (!env.isEmpty()) {
        dirs << env;
    } else {
        const QString exeDir = QCoreApplication::instance()
                                   ? QCoreApplication::applicationDirPath()
                                   : QFileInfo(QFileInfo("/proc/self/exe").canonicalFilePath()).absolutePath();
        dirs << exeDir + "/../share/glimpse";
        if (std::strlen(GLIMPSE_RESOURCES_DIR) > 0) dirs << QString::fromUtf8(GLIMPSE_RESOURCES_DIR);
    }
    for (const QString& d : dirs) {
        const QFileInfo f(QDir(d).filePath(name));
        if (f.isFile()) return f.absoluteFilePath();
    }
    return {};
}

} // namespace glimpse::app
