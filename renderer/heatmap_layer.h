#pragma once
// The heatmap layer: a float grid stretched over the image extent. It is coloured on the CPU
// when the grid, its range, the colour map or the image size change (colorHeatTexture: the
// grid's bilinear field at each image pixel's centre, mapped through the colour map; the
// texture has the image's size, capped at kMaxHeatTextureSide) and uploaded as an RGBA8 "heat"
// texture that the frame samples ~1:1 (opacity is a push constant: its changes rebuild nothing).
// It draws the image too (one pass: the image layer's texture with the heatmap over it), so
// the renderer draws either the image layer or this one.
#include <cstdint>
#include <vector>

#include "renderer/colormap.h"
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
    Colormap colormap = Colormap::Viridis;   // a change rebuilds the heat texture at upload()
    // RGB8 per category; not empty: a categorical heatmap (colorPaletteTexture) instead of the
    // colour map. A change rebuilds the heat texture at upload().
    std::vector<uint8_t> palette;
    float opacity = 0.6f;                    // per frame (push constant)

    // Outside any render pass: (re)builds and uploads the heat texture when the grid, its
    // range, the colour map or the texture size (from the image size) changed.
    void upload(vk::UploadBatch& batch, vk::Retirer& retirer, int imageW, int imageH);
    // Whether draw() has something to draw (a resident heat texture and a visible opacity).
    bool drawable() const { return resident_.heat.valid() && opacity > 0.0f; }
    // Inside the render pass: the image (`imageSet`, its descriptor set) with the heatmap over
    // it, covering the image rectangle (0,0)-(imageW,imageH).
    // `opaqueImage`: the image has no transparency, so the result replaces the pixel (no blend).
    void draw(VkCommandBuffer cmd, const View& view, uint32_t vw, uint32_t vh, int imageW, int imageH,
              VkDescriptorSet imageSet, bool opaqueImage) const;

    // How many times the heat texture was built (for tests: what rebuilds and what does not),
    // the last colouring's time (wall clock, ms) and the resident texture's size.
    uint64_t builds() const { return builds_; }
    double lastBuildMs() const { return lastBuildMs_; }
    int textureWidth() const { return int(resident_.heat.width); }
    int textureHeight() const { return int(resident_.heat.height); }

private:
    struct Resident {
        vk::Texture heat;
        VkDescriptorPool pool = VK_NULL_HANDLE;
        VkDescriptorSet set = VK_NULL_HANDLE;
    };
    void copyIntoResident(VkCommandBuffer cmd, uint32_t w, uint32_t h);
    static void destroy(VkDevice device, Resident& r);
    void release();

    const vk::Gpu& gpu_;
    VkDescriptorSetLayout setLayout_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPipeline pipeline_ = VK_NULL_HANDLE;
    VkPipeline opaquePipeline_ = VK_NULL_HANDLE;
    VkSampler heatSampler_ = VK_NULL_HANDLE;   // linear, clamp to edge
    Resident resident_;

    // The grid (kept: colour map and image size changes rebuild from it).
    int w_ = 0, h_ = 0;
    float vmin_ = 0, vmax_ = 1;
    std::vector<float> grid_;
    bool gridChanged_ = false;
    // What the resident texture was built from.
    Colormap builtMap_ = Colormap::Viridis;
    std::vector<uint8_t> builtPalette_;
    int builtW_ = 0, builtH_ = 0;
    vk::Buffer staging_;          // the colours, built here and copied to the texture
    VkDeviceSize stagingBytes_ = 0;
    uint64_t builds_ = 0;
    double lastBuildMs_ = 0;
};

} // namespace glimpse::render
