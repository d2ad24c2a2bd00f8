#pragma once
// Vulkan renderer for Glimpse viewports: raw Vulkan, no Qt, no LibTorch. It draws plain
// buffers: an RGB(A) image with pan and zoom, and a Dear ImGui overlay, either
//  - into a render pass someone else owns (the widget layer's QVulkanWindow swapchain), or
//  - into its own offscreen colour image that can be read back (OffscreenTarget).
#include <cstdint>
#include <memory>
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

// Thrown for Vulkan failures, with the failing call and VkResult in the message.
class VulkanError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Renderer {
public:
    // `renderPass` is the pass the caller begins before record(); its colour attachment is
    // `colorFormat` with `samples` samples. `framesInFlight` >= 1 (per-frame buffers).
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
    void setBackground(float r, float g, float b);
    // Nearest-neighbour sampling when zoomed in past this zoom (default 2.0: pixels stay crisp).
    void setNearestAboveZoom(double zoom);

    void setOverlay(const Overlay& o);
    // Mouse position in viewport pixels (for ImGui hover), or negative when outside.
    void setMousePos(float x, float y);

    // Records drawing commands into `cmd`, which must be inside the render pass given to the
    // constructor, with a framebuffer of width x height. `frameIndex` < framesInFlight.
    void record(VkCommandBuffer cmd, uint32_t width, uint32_t height, uint32_t frameIndex);

private:
    struct Impl;
    std::unique_ptr<Impl> d;
};

// Owns its own Vulkan instance/device (any device; lavapipe on CPU works), a colour image
// of width x height (R8G8B8A8_UNORM), a render pass and a Renderer drawing into it.
class OffscreenTarget {
public:
    OffscreenTarget(int width, int height);
    ~OffscreenTarget();
    Renderer& renderer();
    int width() const;
    int height() const;
    void resize(int width, int height);
    // Renders one frame and reads it back: width*height*4 bytes, RGBA, rows top to bottom.
    std::vector<uint8_t> render();
    std::string deviceName() const;

private:
    struct Impl;
    std::unique_ptr<Impl> d;
};

} // namespace glimpse::render
