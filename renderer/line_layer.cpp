#include "renderer/line_layer.h"

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "renderer/shaders.h"

namespace glimpse::render {

static_assert(sizeof(LineSegment) == 9 * sizeof(float) && std::is_standard_layout_v<LineSegment>,
              "LineSegment is read by the GPU as 9 packed floats");

namespace {
struct LinePush {
    float centerX, centerY;
    float viewportW, viewportH;
    float zoom;
};
} // namespace

LineLayer::LineLayer(const vk::Gpu& gpu, VkRenderPass renderPass, VkSampleCountFlagBits samples,
                     uint32_t framesInFlight)
    : gpu_(gpu), slots_(framesInFlight) {
    try {
        layout_ = vk::createPipelineLayout(gpu.device, VK_NULL_HANDLE, VK_SHADER_STAGE_VERTEX_BIT, sizeof(LinePush));
        vk::PipelineDesc d;
        d.layout = layout_;
        d.renderPass = renderPass;
        d.samples = samples;
        d.vertWords = shaders::lineVert.words;
        d.vertBytes = shaders::lineVert.bytes;
        d.fragWords = shaders::lineFrag.words;
        d.fragBytes = shaders::lineFrag.bytes;
        d.bindings = {{0, sizeof(LineSegment), VK_VERTEX_INPUT_RATE_INSTANCE}};
        d.attributes = {
            {0, 0, VK_FORMAT_R32G32B32A32_SFLOAT, uint32_t(offsetof(LineSegment, x1))},
            {1, 0, VK_FORMAT_R32G32B32A32_SFLOAT, uint32_t(offsetof(LineSegment, r))},
            {2, 0, VK_FORMAT_R32_SFLOAT, uint32_t(offsetof(LineSegment, widthPx))},
        };
        pipeline_ = vk::createPipeline(gpu.device, d);
    } catch (...) {
        release();
        throw;
    }
}

LineLayer::~LineLayer() { release(); }

void LineLayer::release() {
    for (Slot& s : slots_)
        vk::destroy(gpu_.device, s.buffer);
    if (pipeline_) vkDestroyPipeline(gpu_.device, pipeline_, nullptr);
    if (layout_) vkDestroyPipelineLayout(gpu_.device, layout_, nullptr);
    pipeline_ = VK_NULL_HANDLE;
    layout_ = VK_NULL_HANDLE;
}

void LineLayer::set(std::vector<LineSegment> lines) {
    lines_ = std::move(lines);
    ++generation_;
}

void LineLayer::prepare(uint32_t frameIndex) {
    Slot& slot = slots_.at(frameIndex);
    if (lines_.empty() || slot.generation == generation_)
        return;
    const VkDeviceSize bytes = lines_.size() * sizeof(LineSegment);
    if (slot.buffer.size < bytes) {
        // The slot's previous frame has finished (record()'s contract), so its buffer is free.
        vk::destroy(gpu_.device, slot.buffer);
        VkDeviceSize capacity = 64 * sizeof(LineSegment);
        while (capacity < bytes)
            capacity *= 2;
        slot.buffer = vk::createHostBuffer(gpu_, capacity, VK_BUFFER_USAGE_VERTEX_BUFFER_BIT);
    }
    std::memcpy(slot.buffer.mapped, lines_.data(), size_t(bytes));
    slot.generation = generation_;
}

void LineLayer::draw(VkCommandBuffer cmd, const View& view, uint32_t vw, uint32_t vh, uint32_t frameIndex) const {
    const Slot& slot = slots_.at(frameIndex);
    if (lines_.empty() || slot.generation != generation_)
        return;
    const LinePush push{float(view.centerX), float(view.centerY), float(vw), float(vh), float(view.zoom)};
    const VkDeviceSize offset = 0;
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline_);
    vkCmdPushConstants(cmd, layout_, VK_SHADER_STAGE_VERTEX_BIT, 0, sizeof(push), &push);
    vkCmdBindVertexBuffers(cmd, 0, 1, &slot.buffer.buffer, &offset);
    vkCmdDraw(cmd, 4, uint32_t(lines_.size()), 0, 0);
}

} // namespace glimpse::render
