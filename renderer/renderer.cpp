#include "renderer/renderer.h"

#include <algorithm>
#include <optional>
#include <string>

#include "renderer/heatmap_layer.h"
#include "renderer/image_layer.h"
#include "renderer/line_layer.h"
#include "renderer/overlay_layer.h"
#include "renderer/vk_util.h"

namespace glimpse::render {

struct Renderer::Impl {
    vk::Gpu gpu;
    uint32_t framesInFlight;
    VkCommandPool uploadPool = VK_NULL_HANDLE;
    VkFence uploadFence = VK_NULL_HANDLE;
    vk::Retirer retirer;
    // Layers are optional only so that construction can fail half-way and still clean up.
    std::optional<ImageLayer> image;
    std::optional<HeatmapLayer> heatmap;
    std::optional<LineLayer> lines;
    std::optional<OverlayLayer> overlay;

    View view;
    Color background{0.12f, 0.12f, 0.13f};
    double nearestAbove = 2.0;
    uint64_t frameSerial = 0;
    bool prepared = false;          // prepare() ran for the frame record() draws next
    uint32_t preparedSlot = 0;
    uint64_t uploadWaits = 0, deferredUploads = 0;

    void checkSlot(const char* call, uint32_t frameIndex) const {
        if (frameIndex >= framesInFlight)
            throw VulkanError(std::string(call) + ": frameIndex " + std::to_string(frameIndex) +
                              " >= framesInFlight " + std::to_string(framesInFlight));
    }
    // Records every pending upload into `batch`; true if anything was recorded.
    void uploadAll(vk::UploadBatch& batch, uint32_t width, uint32_t height) {
        image->upload(batch, retirer);
        heatmap->upload(batch, retirer, image->width(), image->height());
        overlay->prepare(batch, width, height);
    }

    Impl(const DeviceContext& ctx, VkRenderPass pass, VkSampleCountFlagBits samples, uint32_t frames)
        : gpu(vk::Gpu::from(ctx)), framesInFlight(frames), retirer(frames) {
        try {
            VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
            pi.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
            pi.queueFamilyIndex = gpu.queueFamily;
            vk::check(vkCreateCommandPool(gpu.device, &pi, nullptr, &uploadPool), "vkCreateCommandPool");
            VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
            vk::check(vkCreateFence(gpu.device, &fi, nullptr, &uploadFence), "vkCreateFence");
            image.emplace(gpu, pass, samples);
            heatmap.emplace(gpu, pass, samples, image->setLayout());
            lines.emplace(gpu, pass, samples, frames);
            overlay.emplace(ctx, gpu, pass, samples, frames);
        } catch (...) {
            release();
            throw;
        }
    }
    ~Impl() { release(); }

    void release() {
        if (gpu.device)
            vkDeviceWaitIdle(gpu.device);
        retirer.flushAll();
        overlay.reset();
        lines.reset();
        heatmap.reset();
        image.reset();
        if (uploadFence)
            vkDestroyFence(gpu.device, uploadFence, nullptr);
        if (uploadPool)
            vkDestroyCommandPool(gpu.device, uploadPool, nullptr);
        uploadFence = VK_NULL_HANDLE;
        uploadPool = VK_NULL_HANDLE;
    }
};

Renderer::Renderer(const DeviceContext& ctx, VkRenderPass renderPass, VkFormat colorFormat,
                   VkSampleCountFlagBits samples, uint32_t framesInFlight) {
    (void)colorFormat;   // pipelines follow the render pass; the format needs no special handling
    if (renderPass == VK_NULL_HANDLE)
        throw VulkanError("Renderer: no render pass given");
    if (framesInFlight < 1)
        throw VulkanError("Renderer: framesInFlight must be at least 1");
    d = std::make_unique<Impl>(ctx, renderPass, samples, framesInFlight);
}

Renderer::~Renderer() = default;

void Renderer::setImage(int width, int height, int channels, const uint8_t* pixels) {
    d->image->set(width, height, channels, pixels);
}
int Renderer::imageWidth() const { return d->image->width(); }
int Renderer::imageHeight() const { return d->image->height(); }

void Renderer::setView(const View& v) { d->view = v; }
const View& Renderer::view() const { return d->view; }
void Renderer::setBackground(float r, float g, float b) { d->background = {r, g, b}; }
Color Renderer::background() const { return d->background; }
void Renderer::setNearestAboveZoom(double zoom) { d->nearestAbove = zoom; }
double Renderer::nearestAboveZoom() const { return d->nearestAbove; }

void Renderer::setHeatmap(int w, int h, const float* values, float vmin, float vmax) {
    d->heatmap->set(w, h, values, vmin, vmax);
}
void Renderer::clearHeatmap() { d->heatmap->clear(); }
bool Renderer::hasHeatmap() const { return d->heatmap->has(); }
void Renderer::setColormap(Colormap c) { d->heatmap->colormap = c; }
Colormap Renderer::colormap() const { return d->heatmap->colormap; }
void Renderer::setHeatPalette(std::vector<uint8_t> rgb) { d->heatmap->palette = std::move(rgb); }
const std::vector<uint8_t>& Renderer::heatPalette() const { return d->heatmap->palette; }
void Renderer::setHeatmapOpacity(float opacity) { d->heatmap->opacity = std::clamp(opacity, 0.0f, 1.0f); }
float Renderer::heatmapOpacity() const { return d->heatmap->opacity; }
uint64_t Renderer::heatmapBuilds() const { return d->heatmap->builds(); }
double Renderer::heatmapBuildMs() const { return d->heatmap->lastBuildMs(); }
int Renderer::heatmapTextureWidth() const { return d->heatmap->textureWidth(); }
int Renderer::heatmapTextureHeight() const { return d->heatmap->textureHeight(); }

void Renderer::setLines(std::vector<LineSegment> lines) { d->lines->set(std::move(lines)); }
const std::vector<LineSegment>& Renderer::lines() const { return d->lines->lines(); }

void Renderer::setOverlay(const Overlay& o) { d->overlay->set(o); }
void Renderer::setMousePos(float x, float y) { d->overlay->setMousePos(x, y); }
RectF Renderer::overlayRect() const { return d->overlay->rect(); }

uint64_t Renderer::uploadWaits() const { return d->uploadWaits; }
uint64_t Renderer::deferredUploads() const { return d->deferredUploads; }

void Renderer::prepare(VkCommandBuffer cmd, uint32_t width, uint32_t height, uint32_t frameIndex) {
    d->checkSlot("Renderer::prepare", frameIndex);
    d->prepared = false;
    d->retirer.beginFrame(++d->frameSerial, frameIndex);
    vk::UploadBatch batch(d->gpu, cmd, d->retirer);
    d->uploadAll(batch, width, height);
    if (batch.hasWork())
        ++d->deferredUploads;
    batch.submitAndWait();   // deferred: hands the staging buffers to the retirer
    d->prepared = true;
    d->preparedSlot = frameIndex;
}

void Renderer::record(VkCommandBuffer cmd, uint32_t width, uint32_t height, uint32_t frameIndex) {
    d->checkSlot("Renderer::record", frameIndex);
    if (!d->prepared || d->preparedSlot != frameIndex) {
        d->retirer.beginFrame(++d->frameSerial, frameIndex);
        // Everything that needs transfer commands goes in one synchronous submission first.
        vk::UploadBatch batch(d->gpu, d->uploadPool, d->uploadFence);
        d->uploadAll(batch, width, height);
        if (batch.submitAndWait())
            ++d->uploadWaits;
    }
    d->prepared = false;
    d->lines->prepare(frameIndex);
    if (width == 0 || height == 0)
        return;

    const VkViewport viewport{0.0f, 0.0f, float(width), float(height), 0.0f, 1.0f};
    const VkRect2D scissor{{0, 0}, {width, height}};
    vkCmdSetViewport(cmd, 0, 1, &viewport);
    vkCmdSetScissor(cmd, 0, 1, &scissor);

    const View& v = d->view;
    // With a heatmap, one pass draws the image and the heatmap over it (no second full-size
    // blended pass); without one, the image layer alone.
    if (d->heatmap->drawable() && d->image->resident())
        d->heatmap->draw(cmd, v, width, height, d->image->width(), d->image->height(),
                         d->image->descriptorSet(v.zoom, d->nearestAbove), d->image->opaque());
    else
        d->image->draw(cmd, v, width, height, d->nearestAbove);
    d->lines->draw(cmd, v, width, height, frameIndex);
    d->overlay->draw(cmd);
}

} // namespace glimpse::render
