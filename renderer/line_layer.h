#pragma once
// The line layer: segments as instances of a 4-vertex strip, expanded to screen-space quads in
// the vertex shader; one draw call for all of them. Each frame slot has its own host-visible
// instance buffer, refilled only when the segments changed since that slot last drew them.
#include <cstdint>
#include <vector>

#include "renderer/vk_util.h"

namespace glimpse::render {

class LineLayer {
public:
    LineLayer(const vk::Gpu& gpu, VkRenderPass renderPass, VkSampleCountFlagBits samples, uint32_t framesInFlight);
    ~LineLayer();
    LineLayer(const LineLayer&) = delete;
    LineLayer& operator=(const LineLayer&) = delete;

    void set(std::vector<LineSegment> lines);
    const std::vector<LineSegment>& lines() const { return lines_; }

    // Before the render pass: fills the slot's instance buffer (growing it) if needed.
    void prepare(uint32_t frameIndex);
    void draw(VkCommandBuffer cmd, const View& view, uint32_t vw, uint32_t vh, uint32_t frameIndex) const;

private:
    struct Slot {
        vk::Buffer buffer;
        uint64_t generation = 0;   // lines_ generation the buffer holds
    };
    void release();

    const vk::Gpu& gpu_;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPipeline pipeline_ = VK_NULL_HANDLE;
    std::vector<Slot> slots_;
    std::vector<LineSegment> lines_;
    uint64_t generation_ = 1;
};

} // namespace glimpse::render
