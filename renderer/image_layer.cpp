#include "renderer/image_layer.h"

#include <algorithm>
#include <stdexcept>

#include "renderer/shaders.h"

namespace glimpse::render {

ImageLayer::ImageLayer(const vk::Gpu& gpu, VkRenderPass renderPass, VkSampleCountFlagBits samples) : gpu_(gpu) {
    try {
        setLayout_ = vk::createSamplerSetLayout(gpu.device, 1);
        layout_ = vk::createPipelineLayout(gpu.device, setLayout_, VK_SHADER_STAGE_VERTEX_BIT, sizeof(vk::NdcRect));
        vk::PipelineDesc d;
        d.layout = layout_;
        d.renderPass = renderPass;
        d.samples = samples;
        d.vertWords = shaders::quadVert.words;
        d.vertBytes = shaders::quadVert.bytes;
        d.fragWords = shaders::imageFrag.words;
        d.fragBytes = shaders::imageFrag.bytes;
        pipeline_ = vk::createPipeline(gpu.device, d);
        d.blend = false;
        opaquePipeline_ = vk::createPipeline(gpu.device, d);
        linear_ = vk::createSampler(gpu.device, VK_FILTER_LINEAR, VK_SAMPLER_MIPMAP_MODE_LINEAR, VK_LOD_CLAMP_NONE);
        nearest_ = vk::createSampler(gpu.device, VK_FILTER_NEAREST, VK_SAMPLER_MIPMAP_MODE_NEAREST, 0.0f);
        // Magnified (zoom >= 1) the base level is all that is sampled: a sampler without mip
        // levels draws the same pixels, and a software rasterizer skips the per-pixel LOD.
        base_ = vk::createSampler(gpu.device, VK_FILTER_LINEAR, VK_SAMPLER_MIPMAP_MODE_NEAREST, 0.0f);
    } catch (...) {
        release();
        throw;
    }
}

ImageLayer::~ImageLayer() { release(); }

void ImageLayer::release() {
    VkDevice dev = gpu_.device;
    destroy(dev, resident_);
    if (nearest_) vkDestroySampler(dev, nearest_, nullptr);
    if (base_) vkDestroySampler(dev, base_, nullptr);
    if (linear_) vkDestroySampler(dev, linear_, nullptr);
    if (pipeline_) vkDestroyPipeline(dev, pipeline_, nullptr);
    if (opaquePipeline_) vkDestroyPipeline(dev, opaquePipeline_, nullptr);
    opaquePipeline_ = VK_NULL_HANDLE;
    if (layout_) vkDestroyPipelineLayout(dev, layout_, nullptr);
    if (setLayout_) vkDestroyDescriptorSetLayout(dev, setLayout_, nullptr);
    nearest_ = linear_ = base_ = VK_NULL_HANDLE;
    pipeline_ = VK_NULL_HANDLE;
    layout_ = VK_NULL_HANDLE;
    setLayout_ = VK_NULL_HANDLE;
}

void ImageLayer::destroy(VkDevice device, Resident& r) {
    if (r.pool)
        vkDestroyDescriptorPool(device, r.pool, nullptr);   // frees its sets
    vk::destroy(device, r.texture);
    r = Resident{};
}

void ImageLayer::set(int width, int height, int channels, const uint8_t* pixels) {
    if (width <= 0 || height <= 0 || !pixels) {
        width_ = height_ = 0;
        pending_.clear();
        dirty_ = true;
        return;
    }
    if (channels != 1 && channels != 3 && channels != 4)
        throw std::invalid_argument("Renderer::setImage: channels must be 1, 3 or 4, got " + std::to_string(channels));
    const size_t n = size_t(width) * size_t(height);
    pending_.resize(n * 4);
    uint8_t* out = pending_.data();
    uint8_t minAlpha = 255;
    for (size_t i = 0; i < n; ++i, out += 4) {
        const uint8_t* in = pixels + i * size_t(channels);
        switch (channels) {
        case 1: out[0] = out[1] = out[2] = in[0]; out[3] = 255; break;
        case 3: out[0] = in[0]; out[1] = in[1]; out[2] = in[2]; out[3] = 255; break;
        default: out[0] = in[0]; out[1] = in[1]; out[2] = in[2]; out[3] = in[3]; break;
        }
        minAlpha = std::min(minAlpha, out[3]);
    }
    opaque_ = minAlpha == 255;
    width_ = width;
    height_ = height;
    dirty_ = true;
}

void ImageLayer::upload(vk::UploadBatch& batch, vk::Retirer& retirer) {
    if (!dirty_)
        return;
    if (resident_.texture.valid()) {
        Resident old = resident_;
        VkDevice dev = gpu_.device;
        retirer.retire([dev, old]() mutable { destroy(dev, old); });
        resident_ = Resident{};
    }
    if (width_ > 0 && height_ > 0) {
        Resident r;
        try {
            r.texture = batch.uploadTexture(VK_FORMAT_R8G8B8A8_UNORM, uint32_t(width_), uint32_t(height_),
                                            pending_.data(), 4, /*mipmaps=*/true);
            r.pool = vk::createSamplerPool(gpu_.device, 3, 1);
            r.linearSet = vk::allocateSet(gpu_.device, r.pool, setLayout_);
            r.nearestSet = vk::allocateSet(gpu_.device, r.pool, setLayout_);
            r.baseSet = vk::allocateSet(gpu_.device, r.pool, setLayout_);
        } catch (...) {
            // The texture may be referenced by the batch's unsubmitted commands: hand it to
            // the retirer rather than destroying it under them.
            VkDevice dev = gpu_.device;
            retirer.retire([dev, r]() mutable { destroy(dev, r); });
            throw;
        }
        vk::writeSampler(gpu_.device, r.linearSet, 0, r.texture.view, linear_);
        vk::writeSampler(gpu_.device, r.nearestSet, 0, r.texture.view, nearest_);
        vk::writeSampler(gpu_.device, r.baseSet, 0, r.texture.view, base_);
        resident_ = r;
    }
    pending_.clear();
    pending_.shrink_to_fit();
    dirty_ = false;
}

VkDescriptorSet ImageLayer::descriptorSet(double zoom, double nearestAbove) const {
    if (zoom >= nearestAbove) return resident_.nearestSet;
    return zoom >= 1.0 ? resident_.baseSet : resident_.linearSet;
}

void ImageLayer::draw(VkCommandBuffer cmd, const View& view, uint32_t vw, uint32_t vh, double nearestAbove) const {
    if (!resident_.texture.valid())
        return;
    const vk::NdcRect rect = vk::imageRectNdc(view, width_, height_, vw, vh);
    const VkDescriptorSet set = descriptorSet(view.zoom, nearestAbove);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, opaque_ ? opaquePipeline_ : pipeline_);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, layout_, 0, 1, &set, 0, nullptr);
    vkCmdPushConstants(cmd, layout_, VK_SHADER_STAGE_VERTEX_BIT, 0, sizeof(rect), &rect);
    vkCmdDraw(cmd, 4, 1, 0, 0);
}

} // namespace glimpse::render
