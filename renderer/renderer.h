#pragma once
// Vulkan renderer for Glimpse viewports: raw Vulkan, no Qt, no LibTorch. It draws plain
// buffers, bottom to top: an RGB(A) image with pan and zoom, a heatmap stretched over the
// image, line segments, and a Dear ImGui overlay, either
//  - into a render pass someone else owns (the widget layer's QVulkanWindow swapchain), or
//  - into its own offscreen colour image that can be read back (OffscreenTarget).
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
#include <vulkan/vulkan.h>

#include "renderer/view.h"

namespace glimpse::render {

// A Vulkan device made elsewhere, which the renderer draws with (it does not own it).
struct DeviceContext {
    VkInstance instance = VK_NULL_HANDLE;
    VkPhysicalDevice physicalDevice = VK_NULL_HANDLE;
    VkDevice device = VK_NULL_HANDLE;
    VkQueue queue = VK_NULL_HANDLE;        // graphics queue
    uint32_t queueFamily = 0;
};

// Text rows shown by the ImGui overlay in the viewport's top-left corner.
struct Overlay {
    bool visible = true;
    std::string title;                                        // bold first line, may be empty
    std::vector<std::pair<std::string, std::string>> rows;    // label, value
};

// Colour maps of the heatmap layer (256-entry tables, see renderer/colormap.h).
enum class Colormap { Viridis, Magma, Jet, Gray };

// A line in image pixel coordinates (pixel (x, y) covers [x, x+1) x [y, y+1)), drawn with
// round caps and anti-aliased edges, `widthPx` screen pixels wide at any zoom. Colour is
// straight (not premultiplied) alpha in 0..1. Laid out as 9 floats: the GPU reads it as is.
struct LineSegment {
    float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
    float r = 1, g = 1, b = 1, a = 1;
    float widthPx = 1;
};

struct Color {
    float r = 0, g = 0, b = 0;
};

// A rectangle in viewport pixels (origin top-left).
struct RectF {
    float x = 0, y = 0, w = 0, h = 0;
    bool empty() const { return w <= 0 || h <= 0; }
    bool contains(float px, float py) const { return px >= x && py >= y && px < x + w && py < y + h; }
};

// Thrown for Vulkan failures, with the failing call and VkResult in the message.
class VulkanError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Renderer {
public:
    // `renderPass` is the pass the caller begins before record(); its colour attachment is
    // `colorFormat` with `samples` samples. `framesInFlight` >= 1 (per-frame buffers).
    // The caller keeps the device alive until the Renderer is destroyed; the destructor waits
    // for the device to go idle. All calls come from one thread (the one that records).
    Renderer(const DeviceContext& ctx, VkRenderPass renderPass, VkFormat colorFormat,
             VkSampleCountFlagBits samples, uint32_t framesInFlight);
    ~Renderer();
    Renderer(const Renderer&) = delete;
    Renderer& operator=(const Renderer&) = delete;

    // Image to show; `channels` 1 (gray), 3 (RGB) or 4 (RGBA), rows tightly packed.
    // Uploaded lazily at the next record(). width/height 0 clears the image.
    void setImage(int width, int height, int channels, const uint8_t* pixels);
    int imageWidth() const;
    int imageHeight() const;

    void setView(const View& v);
    const View& view() const;
    // Colour around the image. The renderer does not clear: the caller's render pass clears to
    // background() (OffscreenTarget does so itself).
    void setBackground(float r, float g, float b);
    Color background() const;
    // Nearest-neighbour sampling when zoomed in past this zoom (default 2.0: pixels stay crisp).
    void setNearestAboveZoom(double zoom);
    double nearestAboveZoom() const;

    // Heatmap: a w x h grid of values (row-major, top row first) stretched over the image's
    // extent (drawn only while an image is set), bilinearly interpolated between cell centres,
    // mapped through the colour map with (v - vmin) / (vmax - vmin) clamped to 0..1, and blended
    // over the image with the heatmap opacity. NaN values are transparent. Copied; coloured on
    // the CPU into a heat texture at the next record() (see colorHeatTexture in colormap.h),
    // again only when the grid, its range, the colour map or the image size change (not the
    // opacity).
    // w or h 0 (or null values) clears it.
    void setHeatmap(int w, int h, const float* values, float vmin, float vmax);
    void clearHeatmap();
    bool hasHeatmap() const;
    void setColormap(Colormap c);
    Colormap colormap() const;
    // A categorical heatmap: RGB8 colours (3 bytes each); the grid's values are then indices into
    // them, each pixel taking the cell under it (see colorPaletteTexture). Empty: the colour map.
    void setHeatPalette(std::vector<uint8_t> rgb);
    const std::vector<uint8_t>& heatPalette() const;
    void setHeatmapOpacity(float opacity);   // clamped to 0..1, default 0.6
    float heatmapOpacity() const;
    // Heat textures built so far, and the last build's colouring time (wall clock, ms).
    uint64_t heatmapBuilds() const;
    double heatmapBuildMs() const;
    int heatmapTextureWidth() const;    // the resident heat texture's size (0 without one)
    int heatmapTextureHeight() const;

    // Line segments drawn over the heatmap, all in one draw call. Replaces the previous set.
    void setLines(std::vector<LineSegment> lines);
    const std::vector<LineSegment>& lines() const;

    void setOverlay(const Overlay& o);
    // Mouse position in viewport pixels (for ImGui hover), or negative when outside.
    void setMousePos(float x, float y);
    // Where the last record() drew the overlay window (viewport pixels); empty if it did not.
    RectF overlayRect() const;

    // Records the pending uploads (image, heatmap, overlay fonts) into `cmd` as transfer
    // commands, outside any render pass, before the caller begins the render pass and calls
    // record() for the same frame (same arguments). Nothing is submitted or waited for: the
    // uploads run on the GPU as part of the frame, and their staging buffers are freed once
    // the frame has finished. Optional: without it, record() uploads synchronously.
    void prepare(VkCommandBuffer cmd, uint32_t width, uint32_t height, uint32_t frameIndex);
    // Records drawing commands into `cmd`, which must be inside the render pass given to the
    // constructor, with a framebuffer of width x height. `frameIndex` < framesInFlight; the
    // GPU must have finished the previous frame recorded with the same frameIndex (as
    // QVulkanWindow guarantees for currentFrame()). Unless prepare() ran for this frame,
    // pending uploads are first submitted on the queue in a command buffer of their own and
    // waited for (the calling thread blocks until the GPU has copied them).
    void record(VkCommandBuffer cmd, uint32_t width, uint32_t height, uint32_t frameIndex);
    // Frames whose uploads were waited for by record() (no prepare()), and frames whose
    // uploads went into the frame itself by prepare(); frames without uploads count in neither.
    uint64_t uploadWaits() const;
    uint64_t deferredUploads() const;

private:
    struct Impl;
    std::unique_ptr<Impl> d;
};

// Owns its own Vulkan instance/device (any device; lavapipe on CPU works), a colour image
// of width x height (R8G8B8A8_UNORM), a render pass and a Renderer drawing into it.
// Device choice: a discrete GPU if any, else integrated, virtual, then CPU (lavapipe); the
// environment variable GLIMPSE_VK_DEVICE (a substring of the device name) overrides it.
// GLIMPSE_VK_VALIDATION=1 enables the Khronos validation layer when it is installed and
// prints its messages to stderr.
class OffscreenTarget {
public:
    // Like a QVulkanWindow swapchain, the target may draw multisampled (resolved into the
    // colour image), have a depth-stencil attachment in its render pass (as QVulkanWindow's
    // default render pass does) and cycle the Renderer through several frame slots; render()
    // still completes each frame before it returns.
    struct Options {
        VkSampleCountFlagBits samples = VK_SAMPLE_COUNT_1_BIT;
        uint32_t framesInFlight = 1;
        bool depthStencil = false;
        // Uploads recorded into the frame's command buffer (Renderer::prepare, as the app's
        // viewport does), or false: record() submits and waits for them separately.
        bool deferredUploads = true;
    };
    OffscreenTarget(int width, int height);
    OffscreenTarget(int width, int height, const Options& options);
    ~OffscreenTarget();
    Renderer& renderer();
    int width() const;
    int height() const;
    void resize(int width, int height);
    // Renders one frame and reads it back: width*height*4 bytes, RGBA, rows top to bottom.
    std::vector<uint8_t> render();
    // Renders one frame and waits for it, without reading it back (what a window's frame
    // costs before presentation; `glimpse bench inspector` times this).
    void renderFrame();
    std::string deviceName() const;
    // Whether the validation layer is on (GLIMPSE_VK_VALIDATION=1 and the layer installed), and
    // how many errors it has reported so far.
    bool validationEnabled() const;
    int validationErrors() const;

private:
    struct Impl;
    std::unique_ptr<Impl> d;
};

} // namespace glimpse::render
