#pragma once
// The Dear ImGui overlay: Overlay{title, rows} as a semi-transparent window in the viewport's
// top-left corner. Each OverlayLayer has its own ImGuiContext (several viewports may exist at
// once) and makes it current around every ImGui call, restoring the previous one.
#include <chrono>
#include <cstdint>

#include "renderer/vk_util.h"

struct ImGuiContext;

namespace glimpse::render {

class OverlayLayer {
public:
    OverlayLayer(const DeviceContext& ctx, const vk::Gpu& gpu, VkRenderPass renderPass,
                 VkSampleCountFlagBits samples, uint32_t framesInFlight);
    ~OverlayLayer();
    OverlayLayer(const OverlayLayer&) = delete;
    OverlayLayer& operator=(const OverlayLayer&) = delete;

    void set(const Overlay& o);
    void setMousePos(float x, float y);

    // Before the render pass: uploads the font atlas the first time it is needed (through
    // `batch`) and builds this frame's ImGui draw data for a width x height viewport.
    void prepare(vk::UploadBatch& batch, uint32_t width, uint32_t height);
    // Inside the render pass: draws what prepare() built, if anything.
    void draw(VkCommandBuffer cmd);
    RectF rect() const { return drawn_ ? rect_ : RectF{}; }

private:
    void buildWindow();

    const vk::Gpu& gpu_;
    ImGuiContext* context_ = nullptr;
    VkDescriptorPool pool_ = VK_NULL_HANDLE;
    bool backendReady_ = false;
    bool fontsUploaded_ = false;

    Overlay overlay_;
    bool changed_ = true;     // content changed since the last frame built
    bool drawn_ = false;      // prepare() built a window to draw
    RectF rect_;
    float mouseX_ = -1, mouseY_ = -1;
    std::chrono::steady_clock::time_point lastFrame_{};
};

} // namespace glimpse::render
