#pragma once
// The image layer: the picture as a textured quad placed by the View, linear (mipmapped)
// sampling, nearest when zoomed in far enough for pixels to stay crisp.
#include <cstdint>
#include <vector>

#include "renderer/vk_util.h"

namespace glimpse::render {

class ImageLayer {
public:
    ImageLayer(const vk::Gpu& gpu, VkRenderPass renderPass, VkSampleCountFlagBits samples);
    ~ImageLayer();
    ImageLayer(const ImageLayer&) = delete;
    ImageLayer& operator=(const ImageLayer&) = delete;

    // Expands gray/RGB to RGBA and keeps it until the next upload(). 0 x 0 removes the image.
    void set(int width, int height, int channels, const uint8_t* pixels);
    int width() const { return width_; }
    // True when every pixel of the image is opaque (gray, RGB, or RGBA with alpha 255 throughout).
    bool opaque() const { return opaque_; }
    int height() const { return height_; }

    // Outside any render pass: uploads a pending image, retiring the previous texture.
    void upload(vk::UploadBatch& batch, vk::Retirer& retirer);
    // Inside the render pass, viewport and scissor set.
    // Sampling: nearest at zoom >= nearestAbove, bilinear on the base level at zoom >= 1, else
    // trilinear over the mip chain.
    void draw(VkCommandBuffer cmd, const View& view, uint32_t vw, uint32_t vh, double nearestAbove) const;
    // For layers drawing the image themselves (the heatmap's combined pass): the descriptor set
    // layout (one combined image sampler) and the resident texture's set; null without a texture.
    VkDescriptorSetLayout setLayout() const { return setLayout_; }
    VkDescriptorSet descriptorSet(double zoom, double nearestAbove) const;
    bool resident() const { return resident_.texture.valid(); }

private:
    struct Resident {
        vk::Texture texture;
        VkDescriptorPool pool = VK_NULL_HANDLE;
        VkDescriptorSet linearSet = VK_NULL_HANDLE;
        VkDescriptorSet nearestSet = VK_NULL_HANDLE;
        VkDescriptorSet baseSet = VK_NULL_HANDLE;   // bilinear, base level only
    };
    static void destroy(VkDevice device, Resident& r);
    void release();

    const vk::Gpu& gpu_;
    VkDescriptorSetLayout setLayout_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPipeline pipeline_ = VK_NULL_HANDLE;
    VkPipeline opaquePipeline_ = VK_NULL_HANDLE;   // no blending, for images without transparency
    VkSampler linear_ = VK_NULL_HANDLE;
    VkSampler nearest_ = VK_NULL_HANDLE;
    VkSampler base_ = VK_NULL_HANDLE;
    Resident resident_;

    int width_ = 0, height_ = 0;
    bool opaque_ = true;
    std::vector<uint8_t> pending_;   // RGBA rows awaiting upload
    bool dirty_ = false;
};

} // namespace glimpse::render
