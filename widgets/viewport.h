#pragma once
// ImageViewport: a QWidget hosting the Vulkan renderer (renderer/) in a QVulkanWindow.
// Mouse: drag to pan, wheel to zoom about the cursor, double-click to fit. Reports the
// image pixel under the cursor and its value. No LibTorch here: it shows plain buffers.
#include <QImage>
#include <QPointer>
#include <QString>
#include <QVulkanWindow>
#include <QWidget>
#include <memory>
#include <vector>

#include "renderer/renderer.h"

class QVulkanInstance;
class QLabel;
class QStackedLayout;

namespace glimpse::widgets {

// The application's single Vulkan instance, created on first use. Returns nullptr when no
// Vulkan driver can be loaded; `error` then says why.
QVulkanInstance* sharedVulkanInstance(QString* error = nullptr);

// A plain RGB8 image held by the widget layer (rows tightly packed).
struct RgbImage {
    int width = 0;
    int height = 0;
    std::vector<uint8_t> rgb;   // width * height * 3
    bool empty() const { return width <= 0 || height <= 0; }
};

class VulkanViewWindow;

class ImageViewport : public QWidget {
    Q_OBJECT
public:
    explicit ImageViewport(QWidget* parent = nullptr);
    ~ImageViewport() override;

    void setImage(RgbImage image);
    const RgbImage& image() const { return image_; }
    bool hasImage() const { return !image_.empty(); }

    render::View view() const { return view_; }
    void setView(const render::View& v);
    double zoom() const { return view_.zoom; }

    void setOverlayVisible(bool on);
    bool overlayVisible() const { return overlay_.visible; }
    void setOverlayTitle(const QString& title);

    // True once the Vulkan window exists and has drawn at least one frame.
    bool isRendering() const;
    // The error shown instead of the viewport when Vulkan is unavailable (empty otherwise).
    QString vulkanError() const { return vulkanError_; }
    // Reads back the last frame drawn in the window (QVulkanWindow::grab()).
    QImage grabFrame();
    // Frames drawn so far (tests wait on this instead of sleeping).
    int framesDrawn() const { return framesDrawn_; }

    // The image pixel under viewport position (x, y) in device-independent pixels, or
    // false when outside the image.
    bool pixelAt(double x, double y, int& px, int& py) const;
    // Pixel value text for (px, py), e.g. "R 12 G 200 B 7".
    QString valueText(int px, int py) const;

public Q_SLOTS:
    void fitToWindow();
    void oneToOne();
    void zoomIn();
    void zoomOut();
    // Undo of view changes: goes back to the view before the last fit / 1:1 / zoom step /
    // drag / wheel gesture. Returns false when there is nothing to go back to.
    bool previousView();
    // Asks for a new frame (coalesced by Qt; drawn when the window is exposed).
    void requestRedraw();

Q_SIGNALS:
    void cursorPixel(int x, int y, const QString& value);   // (-1,-1,"") when outside
    void viewChanged(double zoom);
    void frameDrawn();

private:
    friend class VulkanViewWindow;
    friend class ViewRenderer;
    void pushHistory();
    void applyView(const render::View& v, bool record);
    void updateOverlayRows();
    QSize viewportPixelSize() const;   // physical pixels of the Vulkan surface
    double devicePixelRatioF_() const;

    VulkanViewWindow* window_ = nullptr;
    QWidget* container_ = nullptr;
    QLabel* errorLabel_ = nullptr;
    QString vulkanError_;
    RgbImage image_;
    render::View view_;
    std::vector<render::View> history_;
    render::Overlay overlay_;
    int cursorX_ = -1, cursorY_ = -1;
    bool imageDirty_ = false;
    bool fitPending_ = true;
    int framesDrawn_ = 0;
};

} // namespace glimpse::widgets
