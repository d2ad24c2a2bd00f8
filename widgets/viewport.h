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
#include <string>
#include <utility>
#include <vector>

#include "renderer/renderer.h"
#include "renderer/scene.h"

class QVulkanInstance;
class QLabel;
class QStackedLayout;
class QWindow;

namespace glimpse::widgets {

// The application's single Vulkan instance, created on first use. Returns nullptr when no
// Vulkan driver can be loaded; `error` then says why.
QVulkanInstance* sharedVulkanInstance(QString* error = nullptr);

// The plain image and scene types live in renderer/scene.h (Qt-free); the widget layer uses
// them under these names.
using RgbImage = render::RgbImage;
using ViewportScene = render::ViewportScene;
using render::renderSceneAtImageResolution;

class VulkanViewWindow;

class ImageViewport : public QWidget {
    Q_OBJECT
public:
    explicit ImageViewport(QWidget* parent = nullptr);
    ~ImageViewport() override;

    // Shows `image` and fits it to the window; with keepView and an image of the same size
    // as before (e.g. the next video frame), the view and its undo history stay.
    void setImage(RgbImage image, bool keepView = false);
    const RgbImage& image() const { return image_; }
    bool hasImage() const { return !image_.empty(); }

    render::View view() const { return view_; }
    void setView(const render::View& v);
    // Takes `other`'s view and undo history (synchronized split panes), without recording.
    void followView(const ImageViewport& other);
    double zoom() const { return view_.zoom; }
    // Whether the view is a fit the user has not zoomed or panned since (kept on resizes).
    bool isFitted() const { return fitted_; }

    // Lines, heatmap and overlay rows drawn over the image (replaces the previous scene).
    void setScene(ViewportScene scene);
    const ViewportScene& scene() const { return scene_; }
    // Pick radius for clicks and hover, in screen pixels (default 6).
    void setPickRadius(double px) { pickRadius_ = px; }
    // Index into scene().lines of the pickable line under viewport position (x, y)
    // (device-independent pixels), nearest wins; -1 when none is within the pick radius.
    int lineAtPosition(double x, double y) const;
    // The QWindow receiving mouse and key events (for tests), nullptr without Vulkan.
    QWindow* viewWindow() const;

    void setOverlayVisible(bool on);
    bool overlayVisible() const { return overlay_.visible; }
    // Pixel-exact: nearest-neighbour sampling at every zoom (game frames); otherwise the image
    // is filtered below 2x and nearest from 2x (photos).
    void setPixelExact(bool on);
    bool pixelExact() const { return pixelExact_; }
    void setOverlayTitle(const QString& title);
    // What the ImGui overlay shows now (title and rows, including the hover and heat rows).
    const render::Overlay& overlay() const { return overlay_; }

    // True once the Vulkan window exists and has drawn at least one frame.
    bool isRendering() const;
    // The error shown instead of the viewport when Vulkan is unavailable (empty otherwise).
    QString vulkanError() const { return vulkanError_; }
    // Reads back the last frame drawn in the window (QVulkanWindow::grab()).
    QImage grabFrame();
    // Frames drawn so far (tests wait on this instead of sleeping).
    int framesDrawn() const { return framesDrawn_; }
    // Frames whose texture uploads (image, heatmap) went into the frame itself, and frames
    // whose uploads the UI thread waited for (always 0: the viewport uses Renderer::prepare).
    long long framesWithUploads() const { return framesWithUploads_; }
    long long uploadWaits() const { return uploadWaits_; }

    // The image pixel under viewport position (x, y) in device-independent pixels, or
    // false when outside the image.
    bool pixelAt(double x, double y, int& px, int& py) const;
    // Pixel value text for (px, py), e.g. "R 12 G 200 B 7".
    QString valueText(int px, int py) const;

public Q_SLOTS:
    void fitToWindow();
    // Fits on the next frame drawn, at the size the pane has then (a pane about to be resized,
    // e.g. when the compare pane opens beside it).
    void fitWhenSized();
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
    // A click (press and release without dragging) on a line: its id from the scene.
    void lineClicked(int id);
    // A click that hit no line, at image pixel (px, py) (-1, -1 outside the image).
    void imageClicked(int px, int py);
    // A key pressed while the image has the keyboard focus (Qt::Key, Qt::KeyboardModifiers).
    void keyPressed(int key, int modifiers);

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
    bool pixelExact_ = false;
    ViewportScene scene_;
    bool sceneDirty_ = false;
    double pickRadius_ = 6.0;
    int hoverLine_ = -1;
    int cursorX_ = -1, cursorY_ = -1;
    bool imageDirty_ = false;
    bool fitPending_ = true;
    // The view is a fit (fitToWindow or the first view of an image) that the user has not
    // changed since: refitted when the pane's size changes.
    bool fitted_ = false;
    QSize fittedSize_;
    int framesDrawn_ = 0;
    long long framesWithUploads_ = 0, uploadWaits_ = 0;
};

} // namespace glimpse::widgets
