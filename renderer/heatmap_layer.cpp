#include "renderer/heatmap_layer.h"

#include <algorithm>
#include <cfloat>
#include <cstdlib>

#include "renderer/colormap.h"
#include "renderer/shaders.h"

namespace glimpse::render {
namespace {

struct HeatmapPush {
    vk::NdcRect rect;   // quad.vert, offset 0
    float vmin, vmax, scale, opacity, row, rows;
};

} // namespace

HeatmapLayer::HeatmapLayer(const vk::Gpu& gpu, VkRenderPass renderPass, VkSampleCountFlagBits samples,
                           VkDescriptorSetLayout imageSetLayout)
    : gpu_(gpu) {
    try {
        VkFormatProperties fp{};
        vkGetPhysicalDeviceFormatProperties(gpu.physicalDevice, VK_FORMAT_R32_SFLOAT, &fp);
        linearGrid_ = (fp.optimalTilingFeatures & VK_FORMAT_FEATURE_SAMPLED_IMAGE_FILTER_LINEAR_BIT) != 0 &&
                      !std::getenv("GLIMPSE_HEATMAP_SHADER_FILTER");   // forces the texelFetch path
        setLayout_ = vk::createSamplerSetLayout(gpu.device, 2);
        const VkDescriptorSetLayout sets[2] = {imageSetLayout, setLayout_};
        const VkPushConstantRange range{VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT, 0,
                                        sizeof(HeatmapPush)};
        VkPipelineLayoutCreateInfo li{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
        li.setLayoutCount = 2;
        li.pSetLayouts = sets;
        li.pushConstantRangeCount = 1;
        li.pPushConstantRanges = &range;
        vk::check(vkCreatePipelineLayout(gpu.device, &li, nullptr, &layout_), "vkCreatePipelineLayout");
        // Constants: 0 linearGrid, 1 opaque image (set for the opaque pipeline below).
        VkBool32 constants[2] = {linearGrid_ ? VK_TRUE : VK_FALSE, VK_FALSE};
        const VkSpecializationMapEntry entries[2] = {{0, 0, sizeof(VkBool32)},
                                                     {1, sizeof(VkBool32), sizeof(VkBool32)}};
        VkSpecializationInfo spec{};
        spec.mapEntryCount = 2;
        spec.pMapEntries = entries;
        spec.dataSize = sizeof(constants);
        spec.pData = constants;
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
        constants[1] = VK_TRUE;
        opaquePipeline_ = vk::createPipeline(gpu.device, d);
        gridSampler_ = vk::createSampler(gpu.device, linearGrid_ ? VK_FILTER_LINEAR : VK_FILTER_NEAREST,
                                         VK_SAMPLER_MIPMAP_MODE_NEAREST, 0.0f);
        // Nearest entry: t * 255 rounded (at most half an entry from interpolating the table,
        // and one filtered fetch less per pixel).
        lutSampler_ = vk::createSampler(gpu.device, VK_FILTER_NEAREST, VK_SAMPLER_MIPMAP_MODE_NEAREST, 0.0f);
    } catch (...) {
        release();
        throw;
    }
}

HeatmapLayer::~HeatmapLayer() { release(); }

void HeatmapLayer::release() {
    VkDevice dev = gpu_.device;
    destroy(dev, resident_);
    vk::destroy(dev, lut_);
    if (lutSampler_) vkDestroySampler(dev, lutSampler_, nullptr);
    if (gridSampler_) vkDestroySampler(dev, gridSampler_, nullptr);
    if (pipeline_) vkDestroyPipeline(dev, pipeline_, nullptr);
    if (opaquePipeline_) vkDestroyPipeline(dev, opaquePipeline_, nullptr);
    opaquePipeline_ = VK_NULL_HANDLE;
    if (layout_) vkDestroyPipelineLayout(dev, layout_, nullptr);
    if (setLayout_) vkDestroyDescriptorSetLayout(dev, setLayout_, nullptr);
    lutSampler_ = gridSampler_ = VK_NULL_HANDLE;
    pipeline_ = VK_NULL_HANDLE;
    layout_ = VK_NULL_HANDLE;
    setLayout_ = VK_NULL_HANDLE;
}

void HeatmapLayer::destroy(VkDevice device, Resident& r) {
    if (r.pool)
        vkDestroyDescriptorPool(device, r.pool, nullptr);
    vk::destroy(device, r.grid);
    r = Resident{};
}

void HeatmapLayer::set(int w, int h, const float* values, float vmin, float vmax) {
    if (w <= 0 || h <= 0 || !values) {
        clear();
        return;
    }
    pending_.assign(values, values + size_t(w) * size_t(h));
    w_ = w;
    h_ = h;
    vmin_ = vmin;
    vmax_ = vmax;
    dirty_ = true;
}

void HeatmapLayer::clear() {
    w_ = h_ = 0;
    pending_.clear();
    dirty_ = true;
}

void HeatmapLayer::upload(vk::UploadBatch& batch, vk::Retirer& retirer) {
    if (!lut_.valid()) {
        std::vector<uint8_t> table;
        table.reserve(256 * 4 * kColormapCount);
        for (int m = 0; m < kColormapCount; ++m) {
            const auto row = colormapTable(Colormap(m));
            table.insert(table.end(), row.begin(), row.end());
        }
        lut_ = batch.uploadTexture(VK_FORMAT_R8G8B8A8_UNORM, 256, kColormapCount, table.data(), 4, false);
    }
    if (!dirty_)
        return;
    if (resident_.grid.valid()) {
        Resident old = resident_;
        VkDevice dev = gpu_.device;
        retirer.retire([dev, old]() mutable { destroy(dev, old); });
        resident_ = Resident{};
    }
    if (has()) {
        Resident r;
        try {
            r.grid = batch.uploadTexture(VK_FORMAT_R32_SFLOAT, uint32_t(w_), uint32_t(h_), pending_.data(),
                                         sizeof(float), false);
            r.pool = vk::createSamplerPool(gpu_.device, 1, 2);
            r.set = vk::allocateSet(gpu_.device, r.pool, setLayout_);
        } catch (...) {
            VkDevice dev = gpu_.device;
            retirer.retire([dev, r]() mutable { destroy(dev, r); });
            throw;
        }
        vk::writeSampler(gpu_.device, r.set, 0, r.grid.view, gridSampler_);
        vk::writeSampler(gpu_.device, r.set, 1, lut_.view, lutSampler_);
        resident_ = r;
    }
    pending_.clear();
    pending_.shrink_to_fit();
    dirty_ = false;
}

void HeatmapLayer::draw(VkCommandBuffer cmd, const View& view, uint32_t vw, uint32_t vh, int imageW,
                        int imageH, VkDescriptorSet imageSet, bool opaqueImage) const {
    if (!drawable() || imageSet == VK_NULL_HANDLE || imageW <= 0 || imageH <= 0)
        return;
    HeatmapPush push;
    push.rect = vk::imageRectNdc(view, imageW, imageH, vw, vh);
    push.vmin = vmin_;
    push.vmax = vmax_;
    push.scale = vmax_ > vmin_ ? std::min(1.0f / (vmax_ - vmin_), FLT_MAX) : 0.0f;
    push.opacity = std::clamp(opacity, 0.0f, 1.0f);
    push.row = float(int(colormap));
    push.rows = float(kColormapCount);
    const VkDescriptorSet sets[2] = {imageSet, resident_.set};
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, opaqueImage ? opaquePipeline_ : pipeline_);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, layout_, 0, 2, sets, 0, nullptr);
    vkCmdPushConstants(cmd, layout_, VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT, 0, sizeof(push),
                       &push);
    vkCmdDraw(cmd, 4, 1, 0, 0);
}

} // namespace glimpse::render
