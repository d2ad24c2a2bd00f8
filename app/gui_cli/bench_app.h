#pragma once
// The QApplication of a GUI bench (bench ui, bench results-gui): offscreen when no display is
// set, an application name of its own (the recent files stay the GUI's), one BLAS thread as the
// GUI (app/gui.cpp).
#include <QApplication>

#include <memory>

#include "core/util/threads.h"

namespace glimpse::cli {

inline std::unique_ptr<QApplication> makeBenchApplication(const char* applicationName) {
    if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") &&
        qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    static int argc = 1;
    static char name[] = "glimpse";
    static char* argv[] = {name, nullptr};
    auto app = std::make_unique<QApplication>(argc, argv);
    QApplication::setOrganizationName("Glimpse");
    QApplication::setApplicationName(applicationName);
    glimpse::setBlasThreads(1);
    return app;
}

} // namespace glimpse::cli
