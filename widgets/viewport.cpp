#include "widgets/viewport.h"

#include <QKeyEvent>

#include <QLabel>
#include <QMouseEvent>
#include <QStackedLayout>
#include <QVBoxLayout>
#include <QVulkanFunctions>
#include <QVulkanInstance>
#include <QWheelEvent>
#include <cmath>
#include <cstring>
#include <limits>

namespace glimpse::widgets {

QVulkanInstance* sharedVulkanInstance(QString* error) {
    static QVulkanInstance* instance = nullptr;
    static QString failure;
    static bool tried = false;
    if (!tried) {
        tried = true;
        auto* inst = new QVulkanInstance;
        inst->setApiVersion(QVersionNumber(1, 0));
        if (qEnvironmentVariableIsSet("GLIMPSE_VK_VALIDATION"))
            inst->setLayers({"VK_LAYER_KHRONOS_validation"});
        if (inst->create()) {
            instance = inst;
        } else {
            failure = QStringLiteral("Vulkan is not available (vkCreateInstance failed, error %1). "
                                     "Install a Vulkan driver such as mesa-vulkan-drivers.")
                          .arg(int(inst->errorCode()));
            delete inst;
        }
    }
    if (error) *error = failure;
    return instance;
}

// --- QVulkanWindow side -------------------------------------------------------------

class ViewRenderer : public QVulkanWindowRenderer {
public:
    ViewRenderer(QVulkanWindow* w, ImageViewport* owner) : window_(w), owner_(owner) {}

    void initResources() override {
        render::DeviceContext ctx;
        ctx.instance = window_->vulkanInstance()->vkInstance();
        ctx.physicalDevice = window_->physicalDevice();
        ctx.device = window_->device();
        ctx.queue = window_->graphicsQueue();
        ctx.queueFamily = window_->graphicsQueueFamilyIndex();
        renderer_ = std::make_unique<render::Renderer>(
            ctx, window_->defaultRenderPass(), window_->colorFormat(),
            window_->sampleCountFlagBits(), uint32_t(window_->concurrentFrameCount()));
        renderer_->setBackground(0.12f, 0.13f, 0.15f);
        owner_->imageDirty_ = true;   // a new device needs the image again
        owner_->sceneDirty_ = true;
        shownValid_ = false;
    }
    void releaseResources() override {
        renderer_.reset();
        shownValid_ = false;
    }

    void startNextFrame() override {
        const QSize sz = window_->swapChainImageSize();
        // A fitted view stays fitted when the pane changes size (e.g. the compare pane opens
        // beside it), until the user zooms or pans.
        // Fits are made for the pane's size (its widget's, which a layout change sets at once;
        // the swapchain follows on a later frame).
        const QSize paneSz = owner_->viewportPixelSize();
        const bool refit = owner_->fitted_ && paneSz != owner_->fittedSize_;
        if ((owner_->fitPending_ || refit) && owner_->hasImage() && paneSz.width() > 0 && paneSz.height() > 0) {
            owner_->fitPending_ = false;
            owner_->fitted_ = true;
            owner_->fittedSize_ = paneSz;
            owner_->view_ = render::View::fit(owner_->image_.width, owner_->image_.height,
                                              paneSz.width(), paneSz.height());
            Q_EMIT owner_->viewChanged(owner_->view_.zoom);
            owner_->updateOverlayRows();
        }
        if (owner_->imageDirty_) {
            const auto& im = owner_->image_;
            renderer_->setImage(im.width, im.height, 3, im.rgb.empty() ? nullptr : im.rgb.data());
            owner_->imageDirty_ = false;
        }
        if (owner_->sceneDirty_) {
            owner_->scene_.applyTo(*renderer_, shownValid_ ? &shown_ : nullptr);
            shown_ = owner_->scene_;
            shownValid_ = true;
            owner_->sceneDirty_ = false;
        }
        renderer_->setView(owner_->view_);
        renderer_->setOverlay(owner_->overlay_);
        renderer_->setNearestAboveZoom(owner_->pixelExact_ ? 0.0 : 2.0);

        VkClearValue clear{};
        clear.color = {{0.12f, 0.13f, 0.15f, 1.0f}};
        VkRenderPassBeginInfo rp{};
        rp.sType = VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO;
        rp.renderPass = window_->defaultRenderPass();
        rp.framebuffer = window_->currentFramebuffer();
        rp.renderArea.extent = {uint32_t(sz.width()), uint32_t(sz.height())};
        VkClearValue clears[3] = {clear, {}, clear};
        clears[1].depthStencil = {1.0f, 0};
        rp.clearValueCount = window_->sampleCountFlagBits() > VK_SAMPLE_COUNT_1_BIT ? 3 : 2;
        rp.pClearValues = clears;
        VkCommandBuffer cmd = window_->currentCommandBuffer();
        QVulkanDeviceFunctions* f = window_->vulkanInstance()->deviceFunctions(window_->device());
        // New image/heatmap textures are copied as part of this frame (before its render pass),
        // so the UI thread never waits for an upload (docs/ui-latency.md).
        const uint64_t deferredBefore = renderer_->deferredUploads(), waitsBefore = renderer_->uploadWaits();
        renderer_->prepare(cmd, uint32_t(sz.width()), uint32_t(sz.height()), uint32_t(window_->currentFrame()));
        f->vkCmdBeginRenderPass(cmd, &rp, VK_SUBPASS_CONTENTS_INLINE);
        renderer_->record(cmd, uint32_t(sz.width()), uint32_t(sz.height()),
                          uint32_t(window_->currentFrame()));
        owner_->framesWithUploads_ += (long long)(renderer_->deferredUploads() - deferredBefore);
        owner_->uploadWaits_ += (long long)(renderer_->uploadWaits() - waitsBefore);
        f->vkCmdEndRenderPass(cmd);
        window_->frameReady();
        ++owner_->framesDrawn_;
        Q_EMIT owner_->frameDrawn();
    }

private:
    QVulkanWindow* window_;
    ImageViewport* owner_;
    std::unique_ptr<render::Renderer> renderer_;
    ViewportScene shown_;        // what renderer_ was last given (uploads only what changed)
    bool shownValid_ = false;
};

class VulkanViewWindow : public QVulkanWindow {
public:
    explicit VulkanViewWindow(ImageViewport* owner) : owner_(owner) {
        setFlags(QVulkanWindow::PersistentResources);
        // Images, heatmaps and lines are drawn as stored values (as the offscreen target and
        // PNG export do): an sRGB swapchain would encode them once more (grey 120 showed as 182).
        setPreferredColorFormats({VK_FORMAT_B8G8R8A8_UNORM, VK_FORMAT_R8G8B8A8_UNORM, VK_FORMAT_A8B8G8R8_UNORM_PACK32});
    }
    QVulkanWindowRenderer* createRenderer() override { return new ViewRenderer(this, owner_); }

protected:
    // Keys go to whoever draws the viewport (e.g. the LETR panel steps layers with Left/Right).
    void keyPressEvent(QKeyEvent* e) override {
        Q_EMIT owner_->keyPressed(e->key(), int(e->modifiers()));
        QVulkanWindow::keyPressEvent(e);
    }
    void mousePressEvent(QMouseEvent* e) override {
        if (e->button() == Qt::LeftButton || e->button() == Qt::MiddleButton) {
            dragging_ = true;
            moved_ = false;
            last_ = press_ = e->position();
            owner_->pushHistory();
        }
    }
    void mouseReleaseEvent(QMouseEvent* e) override {
        const bool click = dragging_ && !moved_ && e->button() == Qt::LeftButton;
        dragging_ = false;
        if (!click) return;
        // A click, not a drag: the view did not change, so drop the undo step it pushed.
        if (!owner_->history_.empty() && owner_->history_.back() == owner_->view_)
            owner_->history_.pop_back();
        const QPointF p = e->position();
        const int li = owner_->lineAtPosition(p.x(), p.y());
        if (li >= 0) {
            Q_EMIT owner_->lineClicked(owner_->scene_.lineIds[size_t(li)]);
        } else {
            int px, py;
            if (!owner_->pixelAt(p.x(), p.y(), px, py)) px = py = -1;
            Q_EMIT owner_->imageClicked(px, py);
        }
    }
    void mouseMoveEvent(QMouseEvent* e) override {
        const QPointF p = e->position();
        if (dragging_ && !moved_ && std::hypot(p.x() - press_.x(), p.y() - press_.y()) >= 3.0)
            moved_ = true;
        if (dragging_ && moved_) {
            const double dpr = devicePixelRatio();
            render::View v = owner_->view_;
            v.panByScreen((p.x() - last_.x()) * dpr, (p.y() - last_.y()) * dpr);
            last_ = p;
            owner_->applyView(v, false);
        }
        int px, py;
        if (owner_->pixelAt(p.x(), p.y(), px, py)) {
            owner_->cursorX_ = px;
            owner_->cursorY_ = py;
            Q_EMIT owner_->cursorPixel(px, py, owner_->valueText(px, py));
        } else {
            owner_->cursorX_ = owner_->cursorY_ = -1;
            Q_EMIT owner_->cursorPixel(-1, -1, QString());
        }
        owner_->hoverLine_ = dragging_ ? -1 : owner_->lineAtPosition(p.x(), p.y());
        owner_->updateOverlayRows();
        owner_->requestRedraw();
    }
    void wheelEvent(QWheelEvent* e) override {
        const double steps = e->angleDelta().y() / 120.0;
        if (steps == 0) return;
        const double dpr = devicePixelRatio();
        const QSize sz = owner_->viewportPixelSize();
        if (!wheelGesture_) {
            owner_->pushHistory();
            wheelGesture_ = true;
        }
        render::View v = owner_->view_;
        v.zoomAt(std::pow(1.25, steps), e->position().x() * dpr, e->position().y() * dpr,
                 sz.width(), sz.height());
        owner_->applyView(v, false);
    }
    void mouseDoubleClickEvent(QMouseEvent*) override { owner_->fitToWindow(); }
    void focusOutEvent(QFocusEvent*) override { wheelGesture_ = false; }
    bool event(QEvent* e) override {
        if (e->type() == QEvent::Leave) {
            wheelGesture_ = false;   // the next wheel gesture is a new undo step
            owner_->cursorX_ = owner_->cursorY_ = -1;
            owner_->hoverLine_ = -1;
            Q_EMIT owner_->cursorPixel(-1, -1, QString());
            owner_->updateOverlayRows();
            owner_->requestRedraw();
        }
        return QVulkanWindow::event(e);
    }

private:
    ImageViewport* owner_;
    bool dragging_ = false;
    bool moved_ = false;
    bool wheelGesture_ = false;
    QPointF last_, press_;
};

// --- ImageViewport ------------------------------------------------------------------

ImageViewport::ImageViewport(QWidget* parent) : QWidget(parent) {
    auto* layout = new QStackedLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    overlay_.title = "Glimpse";
    QString err;
    if (QVulkanInstance* inst = sharedVulkanInstance(&err)) {
        window_ = new VulkanViewWindow(this);
        window_->setVulkanInstance(inst);
        container_ = QWidget::createWindowContainer(window_, this);
        container_->setFocusPolicy(Qt::StrongFocus);
        layout->addWidget(container_);
    } else {
        vulkanError_ = err;
        errorLabel_ = new QLabel(err, this);
        errorLabel_->setAlignment(Qt::AlignCenter);
        errorLabel_->setWordWrap(true);
        layout->addWidget(errorLabel_);
    }
    setMinimumSize(160, 120);
    updateOverlayRows();
}

ImageViewport::~ImageViewport() = default;

void ImageViewport::setImage(RgbImage image, bool keepView) {
    if (keepView && image.width == image_.width && image.height == image_.height && !image.empty()) {
        image_ = std::move(image);
        imageDirty_ = true;
        updateOverlayRows();
        requestRedraw();
        return;
    }
    image_ = std::move(image);
    imageDirty_ = true;
    history_.clear();
    cursorX_ = cursorY_ = -1;
    const QSize sz = viewportPixelSize();
    if (sz.width() > 0 && sz.height() > 0 && window_ && window_->isExposed()) {
        view_ = render::View::fit(image_.width, image_.height, sz.width(), sz.height());
        fitPending_ = false;
        fitted_ = true;
        fittedSize_ = sz;
        Q_EMIT viewChanged(view_.zoom);
    } else {
        fitPending_ = true;
    }
    updateOverlayRows();
    requestRedraw();
}

void ImageViewport::setView(const render::View& v) { applyView(v, true); }

void ImageViewport::followView(const ImageViewport& other) {
    history_ = other.history_;
    applyView(other.view_, false);
    // Following a fitted pane: fitted too, at the size this pane has now (a later change of its
    // own size refits it; the panes then follow each other's fit).
    if (other.fitted_) {
        fitted_ = true;
        fittedSize_ = viewportPixelSize();
    }
}

void ImageViewport::fitWhenSized() {
    fitPending_ = true;
    requestRedraw();
}

void ImageViewport::setScene(ViewportScene scene) {
    scene_ = std::move(scene);
    sceneDirty_ = true;
    hoverLine_ = -1;
    updateOverlayRows();
    requestRedraw();
}

QWindow* ImageViewport::viewWindow() const { return window_; }

int ImageViewport::lineAtPosition(double x, double y) const {
    if (!hasImage() || scene_.lines.empty()) return -1;
    const double dpr = devicePixelRatioF_();
    const QSize sz = viewportPixelSize();
    double ix, iy;
    view_.screenToImage(x * dpr, y * dpr, sz.width(), sz.height(), ix, iy);
    return scene_.lineNear(ix, iy, pickRadius_ * dpr / view_.zoom);
}

void ImageViewport::applyView(const render::View& v, bool record) {
    if (record) pushHistory();
    view_ = v;
    fitted_ = false;   // fitToWindow sets it again
    view_.zoom = std::clamp(view_.zoom, render::View::kMinZoom, render::View::kMaxZoom);
    fitPending_ = false;
    updateOverlayRows();
    Q_EMIT viewChanged(view_.zoom);
    requestRedraw();
}

void ImageViewport::pushHistory() {
    if (history_.empty() || !(history_.back() == view_)) history_.push_back(view_);
    if (history_.size() > 100) history_.erase(history_.begin());
}

bool ImageViewport::previousView() {
    if (history_.empty()) return false;
    render::View v = history_.back();
    history_.pop_back();
    applyView(v, false);
    return true;
}

void ImageViewport::fitToWindow() {
    if (!hasImage()) return;
    const QSize sz = viewportPixelSize();
    applyView(render::View::fit(image_.width, image_.height, sz.width(), sz.height()), true);
    fitted_ = true;
    fittedSize_ = sz;
}

void ImageViewport::oneToOne() {
    if (!hasImage()) return;
    render::View v = view_;
    v.zoom = 1.0;
    applyView(v, true);
}

void ImageViewport::zoomIn() {
    const QSize sz = viewportPixelSize();
    render::View v = view_;
    v.zoomAt(1.25, sz.width() * 0.5, sz.height() * 0.5, sz.width(), sz.height());
    applyView(v, true);
}

void ImageViewport::zoomOut() {
    const QSize sz = viewportPixelSize();
    render::View v = view_;
    v.zoomAt(0.8, sz.width() * 0.5, sz.height() * 0.5, sz.width(), sz.height());
    applyView(v, true);
}

void ImageViewport::setOverlayVisible(bool on) {
    overlay_.visible = on;
    requestRedraw();
}

void ImageViewport::setPixelExact(bool on) {
    if (pixelExact_ == on) return;
    pixelExact_ = on;
    requestRedraw();
}

void ImageViewport::setOverlayTitle(const QString& title) {
    overlay_.title = title.toStdString();
    requestRedraw();
}

bool ImageViewport::isRendering() const { return window_ && framesDrawn_ > 0; }

QImage ImageViewport::grabFrame() {
    if (!window_) return {};
    QImage img = window_->grab();
    // QVulkanWindow::grab() copies the swapchain bytes as they are; a BGRA swapchain
    // (the usual one on X11) therefore comes back with red and blue exchanged.
    const VkFormat f = window_->colorFormat();
    if (f == VK_FORMAT_B8G8R8A8_UNORM || f == VK_FORMAT_B8G8R8A8_SRGB) img = img.rgbSwapped();
    return img;
}

double ImageViewport::devicePixelRatioF_() const {
    return window_ ? window_->devicePixelRatio() : devicePixelRatioF();
}

QSize ImageViewport::viewportPixelSize() const {
    // The widget's size: current as soon as a layout changes it (the swapchain image size only
    // follows when the next frame is drawn, so a fit made in between used the old size).
    const double dpr = devicePixelRatioF_();
    return QSize(int(std::lround(width() * dpr)), int(std::lround(height() * dpr)));
}

bool ImageViewport::pixelAt(double x, double y, int& px, int& py) const {
    if (!hasImage()) return false;
    const double dpr = devicePixelRatioF_();
    const QSize sz = viewportPixelSize();
    double ix, iy;
    view_.screenToImage(x * dpr, y * dpr, sz.width(), sz.height(), ix, iy);
    px = int(std::floor(ix));
    py = int(std::floor(iy));
    return px >= 0 && py >= 0 && px < image_.width && py < image_.height;
}

QString ImageViewport::valueText(int px, int py) const {
    if (px < 0 || py < 0 || px >= image_.width || py >= image_.height) return {};
    const uint8_t* p = &image_.rgb[(size_t(py) * image_.width + px) * 3];
    return QStringLiteral("R %1 G %2 B %3").arg(p[0]).arg(p[1]).arg(p[2]);
}

void ImageViewport::updateOverlayRows() {
    overlay_.rows.clear();
    if (!hasImage()) {
        overlay_.rows.push_back({"image", "none (File > Open...)"});
        return;
    }
    overlay_.rows.push_back({"image", std::to_string(image_.width) + " x " + std::to_string(image_.height)});
    overlay_.rows.push_back({"zoom", QString::number(view_.zoom * 100.0, 'f', 1).toStdString() + " %"});
    if (cursorX_ >= 0) {
        overlay_.rows.push_back({"pixel", std::to_string(cursorX_) + ", " + std::to_string(cursorY_)});
        overlay_.rows.push_back({"value", valueText(cursorX_, cursorY_).toStdString()});
    }
    for (const auto& row : scene_.overlayRows) overlay_.rows.push_back(row);
    if (cursorX_ >= 0 && scene_.hasHeatmap()) {
        const float v = scene_.heatAt(cursorX_ + 0.5, cursorY_ + 0.5, image_.width, image_.height);
        overlay_.rows.push_back({scene_.heatLabel, QString::number(double(v), 'g', 4).toStdString()});
    }
    if (hoverLine_ >= 0 && size_t(hoverLine_) < scene_.lineLabels.size())
        overlay_.rows.push_back({"hover", scene_.lineLabels[size_t(hoverLine_)]});
}

void ImageViewport::requestRedraw() {
    if (window_) window_->requestUpdate();
}

} // namespace glimpse::widgets
