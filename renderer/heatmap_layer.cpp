#include "renderer/heatmap_layer.h"

#include <algorithm>
#include <chrono>

#include "renderer/shaders.h"

namespace glimpse::render {
namespace {

struct HeatmapPush {
    vk::NdcRect rect;   // quad.vert, offset 0
    float opacity;
};

} // namespace

HeatmapLayer::HeatmapLayer(const vk::Gpu& gpu, VkRenderPass renderPass, VkSampleCountFlagBits samples,
                           VkDescriptorSetLayout imageSetLayout)
    : gpu_(gpu) {
    try {
        setLayout_ = vk::createSamplerSetLayout(gpu.device, 1);
        const VkDescriptorSetLayout sets[2] = {imageSetLayout, setLayout_};
        const VkPushConstantRange range{VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT, 0,
                                        sizeof(HeatmapPush)};
        VkPipelineLayoutCreateInfo li{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
        li.setLayoutCount = 2;
        li.pSetLayouts = sets;
        li.pushConstantRangeCount = 1;
        li.pPushConstantRanges = &range;
        vk::check(vkCreatePipelineLayout(gpu.device, &li, nullptr, &layout_), "vkCreatePipelineLayout");
        // Constant 0: opaque image (set for the opaque pipeline below).
        VkBool32 opaque = VK_FALSE;
        const VkSpecializationMapEntry entry{0, 0, sizeof(VkBool32)};
        VkSpecializationInfo spec{};
        spec.mapEntryCount = 1;
        spec.pMapEntries = &entry;
        spec.dataSize = sizeof(opaque);
        spec.pData = &opaque;
        vk::PipelineDesc d;
        d.layout = layout_;
        d.renderPass = renderPass;
        d.samples = samples;
        d.vertWords = shaders::quadVert.words;
        d.vertBytes = shaders::quadVert.bytes;
        d.fragWords = shaders::heatmapFrag.words;
        d.fragBytes = shaders::heatmapFrag.bytes;
        d.fragSpecialization = &spec;
        pipeline_ = vk::createPipeline(gpu.device, d);
        d.blend = false;
        opaque = VK_TRUE;
        opaquePipeline_ = vk::createPipeline(gpu.device, d);
        heatSampler_ = vk::createSampler(gpu.device, VK_FILTER_LINEAR, VK_SAMPLER_MIPMAP_MODE_NEAREST, 0.0f);
    } catch (...) {
        release();
        throw;
    }
}

HeatmapLayer::~HeatmapLayer() { release(); }

void HeatmapLayer::release() {
    VkDevice dev = gpu_.device;
    destroy(dev, resident_);
    vk::destroy(dev, staging_);
    stagingBytes_ = 0;
    if (heatSampler_) vkDestroySampler(dev, heatSampler_, nullptr);
    if (pipeline_) vkDestroyPipeline(dev, pipeline_, nullptr);
    if (opaquePipeline_) vkDestroyPipeline(dev, opaquePipeline_, nullptr);
    if (layout_) vkDestroyPipelineLayout(dev, layout_, nullptr);
    if (setLayout_) vkDestroyDescriptorSetLayout(dev, setLayout_, nullptr);
    heatSampler_ = VK_NULL_HANDLE;
    pipeline_ = opaquePipeline_ = VK_NULL_HANDLE;
    layout_ = VK_NULL_HANDLE;
    setLayout_ = VK_NULL_HANDLE;
}

void HeatmapLayer::destroy(VkDevice device, Resident& r) {
    if (r.pool)
        vkDestroyDescriptorPool(device, r.pool, nullptr);
    vk::destroy(device, r.heat);
    r = Resident{};
}

void HeatmapLayer::set(int w, int h, const float* values, float vmin, float vmax) {
    if (w <= 0 || h <= 0 || !values) {
        clear();
        return;
    }
    grid_.assign(values, values + size_t(w) * size_t(h));
    w_ = w;
    h_ = h;
    vmin_ = vmin;
    vmax_ = vmax;
    gridChanged_ = true;
}

void HeatmapLayer::clear() {
    w_ = h_ = 0;
    grid_.clear();
    gridChanged_ = true;
}

void HeatmapLayer::upload(vk::UploadBatch& batch, vk::Retirer& retirer, int imageW, int imageH) {
    // Without an image the heatmap is not drawn; its texture waits for the image's size.
    int tw = 0, th = 0;
    if (has())
        heatTextureSize(imageW, imageH, tw, th);
    const bool stale =
        gridChanged_ || colormap != builtMap_ || palette != builtPalette_ || tw != builtW_ || th != builtH_;
    if (!stale)
        return;
    const bool drawn = has() && tw > 0 && th > 0;
    // Same size: the resident texture is overwritten in place (the descriptor set stays).
    const bool reuse = drawn && resident_.heat.valid() && int(resident_.heat.width) == tw &&
                       int(resident_.heat.height) == th;
    if (resident_.heat.valid() && !reuse) {
        Resident old = resident_;
        VkDevice dev = gpu_.device;
        retirer.retire([dev, old]() mutable { destroy(dev, old); });
        resident_ = Resident{};
    }
    if (drawn) {
        // Coloured straight into a kept, mapped staging buffer. A synchronous upload batch is
        // waited for before the next frame, so the buffer is reused; a deferred one (recorded
        // into a frame that may still be in flight when the next heatmap is coloured) takes it
        // over below and a new one is made next time.
        const VkDeviceSize bytes = VkDeviceSize(tw) * VkDeviceSize(th) * 4;
        if (!staging_.buffer || stagingBytes_ != bytes) {
            vk::destroy(gpu_.device, staging_);
            stagingBytes_ = 0;
            staging_ = vk::createHostBuffer(gpu_, bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT);
            stagingBytes_ = bytes;
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (palette.empty())
            colorHeatTexture(grid_.data(), w_, h_, vmin_, vmax_, colormap, tw, th,
                             static_cast<uint8_t*>(staging_.mapped));
        else
            colorPaletteTexture(grid_.data(), w_, h_, palette.data(), int(palette.size() / 3), tw, th,
                                static_cast<uint8_t*>(staging_.mapped));
        lastBuildMs_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        ++builds_;
        if (reuse) {
            copyIntoResident(batch.cmd(), uint32_t(tw), uint32_t(th));
            if (batch.deferred()) {
                batch.keepUntilDone(staging_);
                staging_ = vk::Buffer{};
                stagingBytes_ = 0;
            }
        } else {
            Resident r;
            try {
                r.heat = batch.uploadTexture(VK_FORMAT_R8G8B8A8_UNORM, uint32_t(tw), uint32_t(th), staging_.mapped, 4,
                                             false);
                r.pool = vk::createSamplerPool(gpu_.device, 1, 1);
                r.set = vk::allocateSet(gpu_.device, r.pool, setLayout_);
            } catch (...) {
                VkDevice dev = gpu_.device;
                retirer.retire([dev, r]() mutable { destroy(dev, r); });
                throw;
            }
            vk::writeSampler(gpu_.device, r.set, 0, r.heat.view, heatSampler_);
            resident_ = r;
        }
    } else if (staging_.buffer) {
        vk::destroy(gpu_.device, staging_);
        stagingBytes_ = 0;
    }
    gridChanged_ = false;
    builtMap_ = colormap;
    builtPalette_ = palette;
    builtW_ = tw;
    builtH_ = th;
}

void HeatmapLayer::copyIntoResident(VkCommandBuffer cmd, uint32_t w, uint32_t h) {
    // Frames recorded earlier may still sample the texture: they were submitted to the same
    // queue before this upload, so a barrier after their fragment shaders orders the overwrite
    // behind them (write-after-read: an execution dependency). The old contents are discarded.
    VkImageMemoryBarrier b{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
    b.srcAccessMask = 0;
    b.dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    b.oldLayout = VK_IMAGE_LAYOUT_UNDEFINED;
    b.newLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL;
    b.srcQueueFamilyIndex = b.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    b.image = resident_.heat.image;
    b.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, nullptr, 0,
                         nullptr, 1, &b);
    VkBufferImageCopy region{};
    region.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
    region.imageExtent = {w, h, 1};
    vkCmdCopyBufferToImage(cmd, staging_.buffer, resident_.heat.image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1,
                           &region);
    b.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
    b.oldLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL;
    b.newLayout = VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT, 0, 0, nullptr, 0,
                         nullptr, 1, &b);
}

void HeatmapLayer::draw(VkCommandBuffer cmd, const View& view, uint32_t vw, uint32_t vh, int imageW,
                        int imageH, VkDescriptorSet imageSet, bool opaqueImage) const {
    if (!drawable() || imageSet == VK_NULL_HANDLE || imageW <= 0 || imageH <= 0)
        return;
    HeatmapPush push;
    push.rect = vk::imageRectNdc(view, imageW, imageH, vw, vh);
    push.opacity = std::clamp(opacity, 0.0f, 1.0f);
    const VkDescriptorSet sets[2] = {imageSet, resident_.set};
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, opaqueImage ? opaquePipeline_ : pipeline_);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, layout_, 0, 2, sets, 0, nullptr);
    vkCmdPushConstants(cmd, layout_, VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT, 0, sizeof(push),
                       &push);
    vkCmdDraw(cmd, 4, 1, 0, 0);
}

} // namespace glimpse::render
