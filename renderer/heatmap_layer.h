#pragma once
// The heatmap layer: a float grid stretched over the image extent, interpolated bilinearly in
// the fragment shader and coloured through a 256-entry colour map table (one row per map).
// It draws the image too (one pass: the image layer's texture with the heatmap over it), so
// the renderer draws either the image layer or this one.
#include <cstdint>
#include <vector>

#include "renderer/vk_util.h"

namespace glimpse::render {

class HeatmapLayer {
public:
    // `imageSetLayout`: the image layer's descriptor set layout (set 0 of the pipeline).
    HeatmapLayer(const vk::Gpu& gpu, VkRenderPass renderPass, VkSampleCountFlagBits samples,
                 VkDescriptorSetLayout imageSetLayout);
    ~HeatmapLayer();
    HeatmapLayer(const HeatmapLayer&) = delete;
    HeatmapLayer& operator=(const HeatmapLayer&) = delete;

    void set(int w, int h, const float* values, float vmin, float vmax);
    void clear();
    bool has() const { return w_ > 0 && h_ > 0; }
    Colormap colormap = Colormap::Viridis;
    float opacity = 0.6f;

    // Outside any render pass: uploads the colour maps once and a pending grid.
    void upload(vk::UploadBatch& batch, vk::Retirer& retirer);
    // Whether draw() has something to draw (a resident grid and a visible opacity).
    bool drawable() const { return resident_.grid.valid() && opacity > 0.0f; }
    // Inside the render pass: the image (`imageSet`, its descriptor set) with the heatmap over
    // it, covering the image rectangle (0,0)-(imageW,imageH).
    // `opaqueImage`: the image has no transparency, so the result replaces the pixel (no blend).
    void draw(VkCommandBuffer cmd, const View& view, uint32_t vw, uint32_t vh, int imageW, int imageH,
              VkDescriptorSet imageSet, bool opaqueImage) const;
    // True when the grid is interpolated by the sampler (R32_SFLOAT linear filtering supported).
    bool linearGrid() const { return linearGrid_; }

private:
    struct Resident {
        vk::Texture grid;
        VkDescriptorPool pool = VK_NULL_HANDLE;
        VkDescriptorSet set = VK_NULL_HANDLE;
    };
    static void destroy(VkDevice device, Resident& r);
    void release();

    const vk::Gpu& gpu_;
    VkDescriptorSetLayout setLayout_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPipeline pipeline_ = VK_NULL_HANDLE;
    VkPipeline opaquePipeline_ = VK_NULL_HANDLE;
    VkSampler gridSampler_ = VK_NULL_HANDLE;   // linear when linearGrid_, else nearest (shader interpolates)
    bool linearGrid_ = false;
    VkSampler lutSampler_ = VK_NULL_HANDLE;    // nearest table entry
    vk::Texture lut_;
    Resident resident_;

    int w_ = 0, h_ = 0;
    float vmin_ = 0, vmax_ = 1;
    std::vector<float> pending_;
    bool dirty_ = false;
};

} // namespace glimpse::render
