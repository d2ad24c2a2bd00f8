// GUI smoke test: the real MainWindow with its Vulkan viewport under Xvfb (lavapipe).
#include <QDir>
#include <QDockWidget>
#include <QComboBox>
#include <QFile>
#include <QListWidget>
#include <QPushButton>
#include <QScrollArea>
#include <QTableWidget>
#include <QFileInfo>
#include <QLabel>
#include <QMenu>
#include <QMenuBar>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QSettings>
#include <QtTest>

#include <utility>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "app/constellation/inspector.h"
#include "app/help.h"
#include "app/panel.h"
#include "app/mainwindow.h"
#include "core/io/demo_image.h"
#include "core/models/constellation/model.h"
#include "core/io/image.h"
#include "widgets/viewport.h"

using glimpse::app::MainWindow;
using glimpse::widgets::ImageViewport;

class TestGui : public QObject {
    Q_OBJECT

    // Waits until the viewport has drawn `extra` more frames, asking for each one
    // (event-driven: qWaitFor processes events until the condition holds).
    static bool waitFrames(ImageViewport* vp, int extra) {
        const int target = vp->framesDrawn() + extra;
        return QTest::qWaitFor([&] {
            vp->requestRedraw();
            return vp->framesDrawn() >= target;
        }, 20000);
    }

    QTemporaryDir dir_;

    // Writes `bgr` as NAME.png, opens it in `w` (shown, 900x700) and waits until it is loaded.
    bool showImage(MainWindow& w, const cv::Mat& bgr, const QString& name) {
        const QString path = dir_.filePath(name + ".png");
        if (!cv::imwrite(path.toStdString(), bgr)) return false;
        w.resize(900, 700);
        w.show();
        if (!QTest::qWaitForWindowExposed(&w)) return false;
        QSignalSpy loaded(&w, &MainWindow::imageLoaded);
        w.openImage(path);
        return loaded.wait(10000);
    }

private Q_SLOTS:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName("GlimpseTest");
        QCoreApplication::setApplicationName("GlimpseTest");
        QVERIFY(dir_.isValid());
    }

    // Issue 56, item 14: Help lists the command line and the keyboard shortcuts (read from the
    // menus), the empty viewport names the menu item as the menu spells it, and "run" names one
    // thing only (Model > Cancel inference vs File > Open training run...).
    void helpMenuAndTexts() {
        MainWindow w;
        auto menuNamed = [&](const QString& title) -> QMenu* {
            for (QAction* a : w.menuBar()->actions())
                if (a->text().remove('&') == title) return a->menu();
            return nullptr;
        };
        auto actionTexts = [](QMenu* m) {
            QStringList out;
            for (QAction* a : m->actions()) out << a->text().remove('&');
            return out;
        };
        QMenu* help = menuNamed("Help");
        QVERIFY(help);
        const QStringList helpItems = actionTexts(help);
        QVERIFY2(helpItems.contains("Command line...") && helpItems.contains("Keyboard shortcuts...") &&
                     helpItems.contains("About Glimpse"),
                 qPrintable(helpItems.join(", ")));
        const QString cmd = glimpse::app::commandLineHelpText();
        QVERIFY2(cmd.contains("glimpse infer") && cmd.contains("--run-coat") && cmd.contains("--layer N"), qPrintable(cmd));
        const QString keys = glimpse::app::shortcutsHelpText(&w);
        QVERIFY2(keys.contains(QRegularExpression("Ctrl\\+O +File > Open\\.\\.\\.\n")), qPrintable(keys));
        QVERIFY2(keys.contains(QRegularExpression("Ctrl\\+\\. +Model > Cancel inference\n")), qPrintable(keys));
        QVERIFY2(keys.contains("Left / Right") && keys.contains("F2"), qPrintable(keys));
        // "run": Model's items run models; the training log is a "training run".
        QMenu* file = menuNamed("File");
        QMenu* model = menuNamed("Model");
        QVERIFY(file && model);
        QVERIFY(actionTexts(file).contains("Open training run..."));
        QVERIFY(!actionTexts(file).contains("Open run..."));
        QVERIFY(actionTexts(model).contains("Cancel inference"));
        QVERIFY(!actionTexts(model).contains("Cancel run"));
        // The empty viewport points at the File menu's own item.
        ImageViewport empty;
        QVERIFY(!empty.overlay().rows.empty());
        QCOMPARE(empty.overlay().rows.front().second, std::string("none (File > Open...)"));
        QVERIFY(actionTexts(file).contains("Open..."));
    }

    // Issue 56, item 11: the Image dock's Source names the file first (it showed the folder and
    // cut the name off in a narrow dock); the full path is the tool tip.
    void sourceNamesTheFile() {
        MainWindow w;
        QDir(dir_.path()).mkpath("a_rather_long_folder_name/and_another_one_below_it");
        const QString name = "a_rather_long_folder_name/and_another_one_below_it/photo";
        QVERIFY(showImage(w, cv::Mat(30, 40, CV_8UC3, cv::Scalar(10, 20, 30)), name));
        auto* dock = w.findChild<QDockWidget*>("dock.image");
        QVERIFY(dock);
        const QString full = QFileInfo(dir_.filePath(name + ".png")).absoluteFilePath();
        QLabel* source = nullptr;
        for (QLabel* l : dock->findChildren<QLabel*>())
            if (l->toolTip() == full) source = l;
        QVERIFY(source);
        QVERIFY2(source->text().startsWith("<b>photo.png</b>"), qPrintable(source->text()));
        QVERIFY(source->wordWrap());
    }

    // Issue 56, item 11: at the default window size every model panel fits its dock column
    // after a run (the ConstellationNet panel was wider: combo boxes and Cancel cut off), and a
    // classifier's top-5 table shows all five rows.
    // On a first start (no saved layout) Messages is about five lines tall, so the image has
    // the window's height; it took a fifth of the default 1280x860 window before.
    void messagesDockStartsSmall() {
        QSettings().clear();
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto* messages = w.findChild<QDockWidget*>("dock.messages");
        QVERIFY(messages);
        const int lines = messages->widget()->fontMetrics().lineSpacing();
        QVERIFY(QTest::qWaitFor([&] { return messages->height() <= 6 * lines + 30; }, 5000));
        QVERIFY2(messages->height() >= 3 * lines, qPrintable(QString::number(messages->height())));
        QVERIFY2(w.height() - messages->height() >= 700,
                 qPrintable(QString("window %1, messages %2").arg(w.height()).arg(messages->height())));
    }

    void panelsFitTheirDock() {
        using namespace glimpse::constellation;
        ConstellationConfig c;
        c.backbone = "conv4";
        c.channels = {8, 8, 8, 8};
        c.clusters = 16;
        c.heads = 4;
        c.imageSize = 32;
        c.numClasses = 6;
        for (int i = 0; i < 6; ++i) c.classNames.push_back("proc-0" + std::to_string(10 + i) + "-texture");
        ConstellationModel model(c, 5);
        const QString ck = dir_.filePath("tiny_constellation.h5");
        saveConstellation(model, ck.toStdString());
        MainWindow w;
        QVERIFY(showImage(w, cv::Mat(64, 96, CV_8UC3, cv::Scalar(30, 60, 90)), "fit"));
        w.resize(1280, 860);
        auto* panel = qobject_cast<glimpse::app::ConstellationInspector*>(w.panel("constellation"));
        QVERIFY(panel);
        QSignalSpy loaded(panel, &glimpse::app::ModelPanel::checkpointLoaded);
        QSignalSpy ready(panel, &glimpse::app::ModelPanel::traceReady);
        panel->loadCheckpoint(ck);
        QVERIFY(loaded.wait(30000));
        panel->run(false);   // raises its dock
        QVERIFY(ready.count() > 0 || ready.wait(60000));
        QVERIFY(panel->moduleBox()->count() > 0);
        for (int i = 0; i < 3; ++i) QCoreApplication::processEvents();   // posted layout requests
        // The raised panel (the other tabs' docks keep stale sizes while hidden).
        auto* scroll = qobject_cast<QScrollArea*>(panel->parentWidget()->parentWidget());
        QVERIFY(scroll && scroll->isVisible());
        QVERIFY2(panel->minimumSizeHint().width() <= scroll->viewport()->width(),
                 qPrintable(QStringLiteral("needs %1 px, the column has %2")
                                .arg(panel->minimumSizeHint().width())
                                .arg(scroll->viewport()->width())));
        // Every control of the shown panel lies inside the column, Cancel included.
        for (QWidget* child : panel->findChildren<QWidget*>()) {
            if (!child->isVisible()) continue;   // e.g. the controls of the other tabs
            if (!qobject_cast<QPushButton*>(child) && !qobject_cast<QComboBox*>(child)) continue;
            const QPoint right = child->mapTo(scroll->viewport(), QPoint(child->width(), 0));
            QVERIFY2(right.x() <= scroll->viewport()->width(),
                     qPrintable(QStringLiteral("'%1' ends at %2, the column at %3")
                                    .arg(child->property("text").toString())
                                    .arg(right.x())
                                    .arg(scroll->viewport()->width())));
        }
        QTableWidget* table = panel->top5Table();
        QCOMPARE(table->rowCount(), 5);
        QVERIFY2(table->rowViewportPosition(4) + table->rowHeight(4) <= table->viewport()->height(),
                 qPrintable(QStringLiteral("row 5 ends at %1, the table shows %2")
                                .arg(table->rowViewportPosition(4) + table->rowHeight(4))
                                .arg(table->viewport()->height())));
        // Gallery cells have room for the patch and its label.
        QListWidget* gallery = panel->gallery();
        QVERIFY(gallery->gridSize().height() >= gallery->iconSize().height() + gallery->fontMetrics().height());
    }

    void opensImageAndDrawsIt() {
        // A known image: left half red, right half blue.
        cv::Mat bgr(60, 80, CV_8UC3, cv::Scalar(255, 0, 0));
        bgr(cv::Rect(0, 0, 40, 60)).setTo(cv::Scalar(0, 0, 255));
        const QString path = dir_.filePath("halves.png");
        QVERIFY(cv::imwrite(path.toStdString(), bgr));

        MainWindow w;
        w.resize(900, 700);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        ImageViewport* vp = w.viewport();
        QVERIFY2(vp->vulkanError().isEmpty(), qPrintable(vp->vulkanError()));

        QSignalSpy loaded(&w, &MainWindow::imageLoaded);
        w.openImage(path);
        QVERIFY(loaded.wait(10000));
        QCOMPARE(vp->image().width, 80);
        QCOMPARE(vp->image().height, 60);
        QVERIFY(w.recentFiles().contains(QFileInfo(path).absoluteFilePath()));

        vp->setOverlayVisible(false);
        QVERIFY(waitFrames(vp, 2));
        const QImage frame = vp->grabFrame();
        QVERIFY(!frame.isNull());
        // Fit to window: the image is centred; sample a quarter left and right of centre.
        const QPoint c(frame.width() / 2, frame.height() / 2);
        const QColor left = frame.pixelColor(c.x() - frame.width() / 8, c.y());
        const QColor right = frame.pixelColor(c.x() + frame.width() / 8, c.y());
        QVERIFY2(left.red() > 200 && left.blue() < 50, qPrintable(left.name()));
        QVERIFY2(right.blue() > 200 && right.red() < 50, qPrintable(right.name()));
        // Fit: the 80x60 image fills the viewport's width or height.
        const double zoomFit = vp->zoom();
        QVERIFY(zoomFit > 5.0);

        // Pixel under the cursor: the viewport centre maps to image pixel (40, 30).
        int px = -1, py = -1;
        QVERIFY(vp->pixelAt(vp->width() / 2.0 + 0.25, vp->height() / 2.0 + 0.25, px, py));
        QCOMPARE(px, 40);
        QCOMPARE(py, 30);
        QCOMPARE(vp->valueText(px, py), QStringLiteral("R 0 G 0 B 255"));
        QCOMPARE(vp->valueText(10, 10), QStringLiteral("R 255 G 0 B 0"));
        QVERIFY(!vp->pixelAt(-5, -5, px, py));

        // 1:1, then back to the fitted view with "previous view".
        vp->oneToOne();
        QCOMPARE(vp->zoom(), 1.0);
        QVERIFY(waitFrames(vp, 1));
        const QImage small = vp->grabFrame();
        // At 1:1 the image is 80 px wide: 50 px right of centre is background.
        const QColor bg = small.pixelColor(c.x() + 50, c.y());
        QVERIFY2(bg.red() < 150 && std::abs(bg.red() - bg.blue()) < 30, qPrintable(bg.name()));
        QVERIFY(vp->previousView());
        QCOMPARE(vp->zoom(), zoomFit);
    }

    // The screen shows the image's stored values: mid greys come back as they are (an sRGB
    // swapchain encoded them a second time: 60 -> 136, 120 -> 182, 200 -> 228).
    void midGreysShowAsStored() {
        cv::Mat bgr(60, 90, CV_8UC3, cv::Scalar(60, 60, 60));
        bgr(cv::Rect(30, 0, 30, 60)).setTo(cv::Scalar(120, 120, 120));
        bgr(cv::Rect(60, 0, 30, 60)).setTo(cv::Scalar(200, 200, 200));
        MainWindow w;
        QVERIFY(showImage(w, bgr, "greys"));
        ImageViewport* vp = w.viewport();
        vp->setOverlayVisible(false);
        QVERIFY(waitFrames(vp, 2));
        const QImage frame = vp->grabFrame();
        const int cy = frame.height() / 2;
        for (const auto& [fx, grey] : {std::pair{1.0 / 6.0, 60}, {0.5, 120}, {5.0 / 6.0, 200}}) {
            // The image is fitted and centred: x fraction fx of it lies at this screen column.
            const double zoom = vp->zoom();
            const int x = int(frame.width() / 2.0 + (fx - 0.5) * 90 * zoom);
            const QColor c = frame.pixelColor(x, cy);
            QVERIFY2(std::abs(c.red() - grey) <= 3 && std::abs(c.green() - grey) <= 3 && std::abs(c.blue() - grey) <= 3,
                     qPrintable(QStringLiteral("grey %1 shows as %2").arg(grey).arg(c.name())));
        }
    }

    // Pixel-exact (game frames): nearest-neighbour at a zoom below 2, where photos are filtered.
    // Across a red/blue edge at 1.5x the filtered image has blended columns, the exact one none.
    void pixelExactSamplesNearest() {
        cv::Mat bgr(60, 80, CV_8UC3, cv::Scalar(255, 0, 0));
        bgr(cv::Rect(0, 0, 40, 60)).setTo(cv::Scalar(0, 0, 255));
        MainWindow w;
        QVERIFY(showImage(w, bgr, "edge"));
        ImageViewport* vp = w.viewport();
        QVERIFY(!vp->pixelExact());
        vp->setOverlayVisible(false);
        glimpse::render::View v = vp->view();
        v.centerX = 40.3;   // the edge off the pixel grid, so filtering has to blend
        v.centerY = 30;
        v.zoom = 1.5;
        vp->setView(v);
        auto blended = [&] {
            const QImage frame = vp->grabFrame();
            const int cy = frame.height() / 2;
            int n = 0;
            for (int x = frame.width() / 2 - 20; x <= frame.width() / 2 + 20; ++x) {
                const QColor c = frame.pixelColor(x, cy);
                n += c.red() > 20 && c.red() < 235 && c.blue() > 20 && c.blue() < 235;
            }
            return n;
        };
        QVERIFY(waitFrames(vp, 2));
        QVERIFY2(blended() > 0, "a filtered edge blends");
        vp->setPixelExact(true);
        QVERIFY(waitFrames(vp, 2));
        QCOMPARE(blended(), 0);
    }

    void demoImageAndOverlay() {
        MainWindow w;
        w.resize(900, 700);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.openDemoImage();
        ImageViewport* vp = w.viewport();
        QVERIFY(vp->hasImage());
        vp->setOverlayVisible(false);
        QVERIFY(waitFrames(vp, 2));
        const QImage plain = vp->grabFrame();
        vp->setOverlayVisible(true);
        QVERIFY(waitFrames(vp, 2));
        const QImage withOverlay = vp->grabFrame();
        QCOMPARE(plain.size(), withOverlay.size());
        // The ImGui overlay sits in the top-left corner; the bottom-right stays the same.
        int changedTopLeft = 0, changedBottomRight = 0;
        for (int y = 0; y < 60; ++y)
            for (int x = 0; x < 150; ++x) {
                if (plain.pixel(x + 5, y + 5) != withOverlay.pixel(x + 5, y + 5)) ++changedTopLeft;
                const int bx = plain.width() - 1 - x, by = plain.height() - 1 - y;
                if (plain.pixel(bx, by) != withOverlay.pixel(bx, by)) ++changedBottomRight;
            }
        QVERIFY2(changedTopLeft > 500, qPrintable(QString::number(changedTopLeft)));
        QCOMPARE(changedBottomRight, 0);
    }

    void badInputGivesClearMessage() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QSignalSpy failed(&w, &MainWindow::loadFailed);

        const QString missing = dir_.filePath("does-not-exist.png");
        w.openImage(missing);
        QVERIFY(failed.wait(10000));
        QString msg = failed.takeFirst().at(1).toString();
        QVERIFY2(msg.contains("does-not-exist.png"), qPrintable(msg));
        QVERIFY(w.lastError() == msg);

        const QString garbage = dir_.filePath("garbage.jpg");
        QFile f(garbage);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("this is not a jpeg at all");
        f.close();
        w.openImage(garbage);
        QVERIFY(failed.wait(10000));
        msg = failed.takeFirst().at(1).toString();
        QVERIFY2(msg.contains("garbage.jpg"), qPrintable(msg));
        QVERIFY(w.isVisible());   // still alive
    }

    void exportViewRoundTrips() {
        MainWindow w;
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        w.openDemoImage();
        const QString out = dir_.filePath("export.png");
        QSignalSpy done(&w, &MainWindow::exported);
        QSignalSpy failed(&w, &MainWindow::exportFailed);
        w.exportViewPng(out);
        QVERIFY(QTest::qWaitFor([&] { return done.count() + failed.count() > 0; }, 30000));
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(1).toString()));
        const cv::Mat got = glimpse::loadImageRGB(out.toStdString());
        const cv::Mat want = glimpse::makeDemoImage();
        QCOMPARE(got.cols, want.cols);
        QCOMPARE(got.rows, want.rows);
        cv::Mat diff;
        cv::absdiff(got, want, diff);
        double maxDiff = 0;
        cv::minMaxLoc(diff.reshape(1), nullptr, &maxDiff);
        QVERIFY2(maxDiff <= 2, qPrintable(QString::number(maxDiff)));
    }
};

QTEST_MAIN(TestGui)
#include "test_gui.moc"
