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

class QVulkanInstance;
class QLabel;
class QStackedLayout;
class QWindow;

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

// What the viewport draws over its image: line segments (each with an id used by hit-testing
// and a hover label), a heatmap stretched over the image, and extra overlay rows. Plain
// buffers: whoever owns a model converts its results into this.
struct ViewportScene {
    std::vector<render::LineSegment> lines;
    std::vector<int> lineIds;            // one per line (e.g. an entity number); -1 = not pickable
    std::vector<std::string> lineLabels; // hover text per line (may be empty)
    int heatW = 0, heatH = 0;            // heatmap grid; 0 = none
    std::vector<float> heat;             // heatW * heatH, row-major, top row first
    float heatMin = 0.f, heatMax = 1.f;
    std::string heatLabel = "heat";      // overlay row label of the value under the cursor
    render::Colormap colormap = render::Colormap::Viridis;
    float opacity = 0.6f;
    std::vector<std::pair<std::string, std::string>> overlayRows;   // appended to the overlay
    bool hasHeatmap() const { return heatW > 0 && heatH > 0 && heat.size() == size_t(heatW) * heatH; }
    // Heatmap value at continuous image coordinate (ix, iy) for an image of imageW x imageH,
    // bilinear between cell centres as the renderer draws it; NaN when there is no heatmap.
    float heatAt(double ix, double iy, int imageW, int imageH) const;
    // Index into `lines` of the pickable line nearest to image point (ix, iy) within
    // `maxDist` image pixels, or -1.
    int lineNear(double ix, double iy, double maxDist) const;
    // Sets everything except the image, view and overlay on `r`. With `previous` (what `r`
    // shows now), only what differs is handed over, so unchanged lines or heatmaps are not
    // uploaded again.
    void applyTo(render::Renderer& r, const ViewportScene* previous = nullptr) const;
};

// Renders `image` with `scene` (overlay hidden) offscreen at the image's own resolution (view
// 1:1) and returns RGB8 rows: what "export view as PNG" writes. Throws render::VulkanError.
RgbImage renderSceneAtImageResolution(const RgbImage& image, const ViewportScene& scene);

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
    // A click (press and release without dragging) on a line: its id from the scene.
    void lineClicked(int id);
    // A click that hit no line, at image pixel (px, py) (-1, -1 outside the image).
    void imageClicked(int px, int py);

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
    ViewportScene scene_;
    bool sceneDirty_ = false;
    double pickRadius_ = 6.0;
    int hoverLine_ = -1;
    int cursorX_ = -1, cursorY_ = -1;
    bool imageDirty_ = false;
    bool fitPending_ = true;
    int framesDrawn_ = 0;
};

} // namespace glimpse::widgets
