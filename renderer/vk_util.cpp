#include "renderer/vk_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace glimpse::render::vk {

const char* resultName(VkResult r) {
    switch (r) {
#define GLIMPSE_VK_RESULT(name) case name: return #name;
        GLIMPSE_VK_RESULT(VK_SUCCESS)
        GLIMPSE_VK_RESULT(VK_NOT_READY)
        GLIMPSE_VK_RESULT(VK_TIMEOUT)
        GLIMPSE_VK_RESULT(VK_EVENT_SET)
        GLIMPSE_VK_RESULT(VK_EVENT_RESET)
        GLIMPSE_VK_RESULT(VK_INCOMPLETE)
        GLIMPSE_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
        GLIMPSE_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        GLIMPSE_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
        GLIMPSE_VK_RESULT(VK_ERROR_DEVICE_LOST)
        GLIMPSE_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
        GLIMPSE_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
        GLIMPSE_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
        GLIMPSE_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
        GLIMPSE_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
        GLIMPSE_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
        GLIMPSE_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
        GLIMPSE_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
        GLIMPSE_VK_RESULT(VK_ERROR_UNKNOWN)
        GLIMPSE_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
        GLIMPSE_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        GLIMPSE_VK_RESULT(VK_ERROR_FRAGMENTATION)
        GLIMPSE_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
        GLIMPSE_VK_RESULT(VK_ERROR_SURFACE_LOST_KHR)
        GLIMPSE_VK_RESULT(VK_ERROR_NATIVE_WINDOW_IN_USE_KHR)
        GLIMPSE_VK_RESULT(VK_SUBOPTIMAL_KHR)
        GLIMPSE_VK_RESULT(VK_ERROR_OUT_OF_DATE_KHR)
        GLIMPSE_VK_RESULT(VK_ERROR_VALIDATION_FAILED_EXT)
#undef GLIMPSE_VK_RESULT
    default:
        return "VkResult(unknown)";
    }
}

void check(VkResult r, const char* call) {
    if (r >= 0)
        return;
    std::string msg = std::string(call) + " failed: " + resultName(r);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED)
        msg += " (is a Vulkan driver such as mesa-vulkan-drivers installed?)";
    throw VulkanError(msg);
}

Gpu Gpu::from(const DeviceContext& ctx) {
    if (ctx.physicalDevice == VK_NULL_HANDLE || ctx.device == VK_NULL_HANDLE || ctx.queue == VK_NULL_HANDLE)
        throw VulkanError("Renderer: DeviceContext needs a physical device, a device and a queue");
    Gpu g;
    g.physicalDevice = ctx.physicalDevice;
    g.device = ctx.device;
    g.queue = ctx.queue;
    g.queueFamily = ctx.queueFamily;
    vkGetPhysicalDeviceMemoryProperties(ctx.physicalDevice, &g.memory);
    return g;
}

uint32_t Gpu::memoryType(uint32_t typeBits, VkMemoryPropertyFlags required,
                         VkMemoryPropertyFlags preferred) const {
    uint32_t fallback = UINT32_MAX;
    for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
        if (!(typeBits & (1u << i)))
            continue;
        const VkMemoryPropertyFlags f = memory.memoryTypes[i].propertyFlags;
        if ((f & required) != required)
            continue;
        if ((f & preferred) == preferred)
            return i;
        if (fallback == UINT32_MAX)
            fallback = i;
    }
    if (fallback == UINT32_MAX)
        throw VulkanError("no Vulkan memory type with properties 0x" + std::to_string(required));
    return fallback;
}

Buffer createHostBuffer(const Gpu& gpu, VkDeviceSize size, VkBufferUsageFlags usage,
                        VkMemoryPropertyFlags preferred) {
    Buffer b;
    b.size = std::max<VkDeviceSize>(size, 16);
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = b.size;
    bi.usage = usage;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    check(vkCreateBuffer(gpu.device, &bi, nullptr, &b.buffer), "vkCreateBuffer");
    try {
        VkMemoryRequirements req;
        vkGetBufferMemoryRequirements(gpu.device, b.buffer, &req);
        VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
        ai.allocationSize = req.size;
        ai.memoryTypeIndex = gpu.memoryType(
            req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, preferred);
        check(vkAllocateMemory(gpu.device, &ai, nullptr, &b.memory), "vkAllocateMemory");
        check(vkBindBufferMemory(gpu.device, b.buffer, b.memory, 0), "vkBindBufferMemory");
        check(vkMapMemory(gpu.device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory");
    } catch (...) {
        destroy(gpu.device, b);
        throw;
    }
    return b;
}

void destroy(VkDevice device, Buffer& b) {
    if (b.mapped)
        vkUnmapMemory(device, b.memory);
    if (b.buffer)
        vkDestroyBuffer(device, b.buffer, nullptr);
    if (b.memory)
        vkFreeMemory(device, b.memory, nullptr);
    b = Buffer{};
}

void destroy(VkDevice device, Texture& t) {
    if (t.view)
        vkDestroyImageView(device, t.view, nullptr);
    if (t.image)
        vkDestroyImage(device, t.image, nullptr);
    if (t.memory)
        vkFreeMemory(device, t.memory, nullptr);
    t = Texture{};
}

// ---- UploadBatch ------------------------------------------------------------------------

UploadBatch::UploadBatch(const Gpu& gpu, VkCommandPool pool, VkFence fence)
    : gpu_(gpu), pool_(pool), fence_(fence) {}

UploadBatch::UploadBatch(const Gpu& gpu, VkCommandBuffer frameCmd, Retirer& retirer)
    : gpu_(gpu), retirer_(&retirer), cmd_(frameCmd) {}

UploadBatch::~UploadBatch() {
    // Normally empty: submitAndWait() ran. After an exception, nothing was submitted (or the
    // submission was waited for), so the staging buffers are free to go; in deferred mode the
    // frame's command buffer may still be submitted, so they wait for it like any other.
    if (retirer_) {
        for (Buffer& b : staging_) {
            VkDevice dev = gpu_.device;
            retirer_->retireAfterCurrentFrame([dev, b]() mutable { destroy(dev, b); });
        }
        return;
    }
    for (Buffer& b : staging_)
        destroy(gpu_.device, b);
    if (cmd_)
        vkFreeCommandBuffers(gpu_.device, pool_, 1, &cmd_);
}

VkCommandBuffer UploadBatch::cmd() {
    used_ = true;
    if (cmd_)
        return cmd_;   // begun, or (deferred) the frame's command buffer
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(gpu_.device, &ai, &cmd_), "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
    return cmd_;
}

static void imageBarrier(VkCommandBuffer cmd, VkImage image, uint32_t baseMip, uint32_t mipCount,
                         VkImageLayout from, VkImageLayout to, VkAccessFlags srcAccess, VkAccessFlags dstAccess,
                         VkPipelineStageFlags srcStage, VkPipelineStageFlags dstStage) {
    VkImageMemoryBarrier b{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
    b.srcAccessMask = srcAccess;
    b.dstAccessMask = dstAccess;
    b.oldLayout = from;
    b.newLayout = to;
    b.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    b.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    b.image = image;
    b.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, baseMip, mipCount, 0, 1};
    vkCmdPipelineBarrier(cmd, srcStage, dstStage, 0, 0, nullptr, 0, nullptr, 1, &b);
}

Texture UploadBatch::uploadTexture(VkFormat format, uint32_t width, uint32_t height, const void* pixels,
                                   size_t bytesPerPixel, bool mipmaps) {
    const VkDeviceSize bytes = VkDeviceSize(width) * height * bytesPerPixel;
    Buffer staging = createHostBuffer(gpu_, bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT);
    staging_.push_back(staging);
    std::memcpy(staging.mapped, pixels, size_t(bytes));

    if (mipmaps) {
        VkFormatProperties fp;
        vkGetPhysicalDeviceFormatProperties(gpu_.physicalDevice, format, &fp);
        const VkFormatFeatureFlags need = VK_FORMAT_FEATURE_BLIT_SRC_BIT | VK_FORMAT_FEATURE_BLIT_DST_BIT |
                                          VK_FORMAT_FEATURE_SAMPLED_IMAGE_FILTER_LINEAR_BIT;
        mipmaps = (fp.optimalTilingFeatures & need) == need;
    }

    Texture t;
    t.width = width;
    t.height = height;
    t.mipLevels = mipmaps ? uint32_t(std::floor(std::log2(double(std::max(width, height))))) + 1 : 1;
    try {
        VkImageCreateInfo ii{VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO};
        ii.imageType = VK_IMAGE_TYPE_2D;
        ii.format = format;
        ii.extent = {width, height, 1};
        ii.mipLevels = t.mipLevels;
        ii.arrayLayers = 1;
        ii.samples = VK_SAMPLE_COUNT_1_BIT;
        ii.tiling = VK_IMAGE_TILING_OPTIMAL;
        ii.usage = VK_IMAGE_USAGE_SAMPLED_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT |
                   (t.mipLevels > 1 ? VK_IMAGE_USAGE_TRANSFER_SRC_BIT : 0);
        ii.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
        ii.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
        check(vkCreateImage(gpu_.device, &ii, nullptr, &t.image), "vkCreateImage");

        VkMemoryRequirements req;
        vkGetImageMemoryRequirements(gpu_.device, t.image, &req);
        VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
        ai.allocationSize = req.size;
        ai.memoryTypeIndex = gpu_.memoryType(req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
        check(vkAllocateMemory(gpu_.device, &ai, nullptr, &t.memory), "vkAllocateMemory");
        check(vkBindImageMemory(gpu_.device, t.image, t.memory, 0), "vkBindImageMemory");

        VkImageViewCreateInfo vi{VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO};
        vi.image = t.image;
        vi.viewType = VK_IMAGE_VIEW_TYPE_2D;
        vi.format = format;
        vi.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, t.mipLevels, 0, 1};
        check(vkCreateImageView(gpu_.device, &vi, nullptr, &t.view), "vkCreateImageView");
    } catch (...) {
        destroy(gpu_.device, t);
        throw;
    }

    VkCommandBuffer c = cmd();
    imageBarrier(c, t.image, 0, t.mipLevels, VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 0,
                 VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT);
    VkBufferImageCopy region{};
    region.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
    region.imageExtent = {width, height, 1};
    vkCmdCopyBufferToImage(c, staging.buffer, t.image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, &region);

    // Each level is blitted (halved, linear) from the one above, which then moves to its
    // sampling layout; the last level follows after the loop.
    int32_t w = int32_t(width), h = int32_t(height);
    for (uint32_t level = 1; level < t.mipLevels; ++level) {
        imageBarrier(c, t.image, level - 1, 1, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                     VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_TRANSFER_READ_BIT,
                     VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT);
        const int32_t nw = std::max(1, w / 2), nh = std::max(1, h / 2);
        VkImageBlit blit{};
        blit.srcSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, level - 1, 0, 1};
        blit.srcOffsets[1] = {w, h, 1};
        blit.dstSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, level, 0, 1};
        blit.dstOffsets[1] = {nw, nh, 1};
        vkCmdBlitImage(c, t.image, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, t.image, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                       1, &blit, VK_FILTER_LINEAR);
        imageBarrier(c, t.image, level - 1, 1, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                     VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL, VK_ACCESS_TRANSFER_READ_BIT, VK_ACCESS_SHADER_READ_BIT,
                     VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT);
        w = nw;
        h = nh;
    }
    imageBarrier(c, t.image, t.mipLevels - 1, 1, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                 VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL, VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_SHADER_READ_BIT,
                 VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT);
    return t;
}

bool UploadBatch::submitAndWait() {
    std::vector<std::function<void()>> after;
    after.swap(after_);
    if (retirer_) {
        for (Buffer& b : staging_) {
            VkDevice dev = gpu_.device;
            retirer_->retireAfterCurrentFrame([dev, b]() mutable { destroy(dev, b); });
        }
        staging_.clear();
        for (auto& fn : after)
            retirer_->retireAfterCurrentFrame(std::move(fn));
        return false;
    }
    const bool waited = cmd_ != VK_NULL_HANDLE;
    if (cmd_) {
        check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
        VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
        si.commandBufferCount = 1;
        si.pCommandBuffers = &cmd_;
        check(vkResetFences(gpu_.device, 1, &fence_), "vkResetFences");
        check(vkQueueSubmit(gpu_.queue, 1, &si, fence_), "vkQueueSubmit");
        check(vkWaitForFences(gpu_.device, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
        vkFreeCommandBuffers(gpu_.device, pool_, 1, &cmd_);
        cmd_ = VK_NULL_HANDLE;
    }
    for (Buffer& b : staging_)
        destroy(gpu_.device, b);
    staging_.clear();
    for (auto& fn : after)
        fn();
    return waited;
}

// ---- Retirer ------------------------------------------------------------------------------

void Retirer::beginFrame(uint64_t serial, uint32_t slot) {
    serial_ = serial;
    slotFrame_.at(slot) = serial;
    // An entry retired while frame `e.serial` began was last used by earlier frames. Slot s has
    // finished all of those once it has begun a frame >= e.serial (or was never used).
    auto done = [&](const Entry& e) {
        for (uint64_t f : slotFrame_)
            if (f != 0 && f < e.serial)
                return false;
        return true;
    };
    std::vector<Entry> keep;
    for (Entry& e : entries_) {
        if (done(e))
            e.destroy();
        else
            keep.push_back(std::move(e));
    }
    entries_.swap(keep);
}

void Retirer::retire(std::function<void()> destroy) {
    // Retired during frame serial_ (before that frame used it): earlier frames may use it.
    entries_.push_back({std::max<uint64_t>(serial_, 1), std::move(destroy)});
}

void Retirer::retireAfterCurrentFrame(std::function<void()> destroy) {
    // Done once every slot has begun a frame after the current one (the current frame's slot
    // only does so after the current frame has finished).
    entries_.push_back({serial_ + 1, std::move(destroy)});
}

void Retirer::flushAll() {
    for (Entry& e : entries_)
        e.destroy();
    entries_.clear();
}

// ---- pipelines ----------------------------------------------------------------------------

VkShaderModule createShader(VkDevice device, const uint32_t* words, size_t bytes) {
    VkShaderModuleCreateInfo ci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    ci.codeSize = bytes;
    ci.pCode = words;
    VkShaderModule m = VK_NULL_HANDLE;
    check(vkCreateShaderModule(device, &ci, nullptr, &m), "vkCreateShaderModule");
    return m;
}

VkPipeline createPipeline(VkDevice device, const PipelineDesc& d) {
    VkShaderModule vert = createShader(device, d.vertWords, d.vertBytes);
    VkShaderModule frag = VK_NULL_HANDLE;
    try {
        frag = createShader(device, d.fragWords, d.fragBytes);
    } catch (...) {
        vkDestroyShaderModule(device, vert, nullptr);
        throw;
    }

    VkPipelineShaderStageCreateInfo stages[2]{};
    stages[0].sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    stages[0].stage = VK_SHADER_STAGE_VERTEX_BIT;
    stages[0].module = vert;
    stages[0].pName = "main";
    stages[1].sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    stages[1].stage = VK_SHADER_STAGE_FRAGMENT_BIT;
    stages[1].module = frag;
    stages[1].pName = "main";
    stages[1].pSpecializationInfo = d.fragSpecialization;

    VkPipelineVertexInputStateCreateInfo vin{VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO};
    vin.vertexBindingDescriptionCount = uint32_t(d.bindings.size());
    vin.pVertexBindingDescriptions = d.bindings.data();
    vin.vertexAttributeDescriptionCount = uint32_t(d.attributes.size());
    vin.pVertexAttributeDescriptions = d.attributes.data();

    VkPipelineInputAssemblyStateCreateInfo ia{VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO};
    ia.topology = d.topology;

    VkPipelineViewportStateCreateInfo vp{VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO};
    vp.viewportCount = 1;
    vp.scissorCount = 1;

    VkPipelineRasterizationStateCreateInfo rs{VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO};
    rs.polygonMode = VK_POLYGON_MODE_FILL;
    rs.cullMode = VK_CULL_MODE_NONE;
    rs.frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE;
    rs.lineWidth = 1.0f;

    VkPipelineMultisampleStateCreateInfo ms{VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO};
    ms.rasterizationSamples = d.samples;

    // Straight-alpha "over" for colour; alpha accumulates coverage (stays 1 over an opaque clear).
    VkPipelineColorBlendAttachmentState blend{};
    blend.blendEnable = d.blend ? VK_TRUE : VK_FALSE;
    blend.srcColorBlendFactor = VK_BLEND_FACTOR_SRC_ALPHA;
    blend.dstColorBlendFactor = VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA;
    blend.colorBlendOp = VK_BLEND_OP_ADD;
    blend.srcAlphaBlendFactor = VK_BLEND_FACTOR_ONE;
    blend.dstAlphaBlendFactor = VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA;
    blend.alphaBlendOp = VK_BLEND_OP_ADD;
    blend.colorWriteMask = VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT | VK_COLOR_COMPONENT_B_BIT |
                           VK_COLOR_COMPONENT_A_BIT;
    // No depth test or write; the state must be given when the caller's subpass has a
    // depth-stencil attachment (QVulkanWindow's default render pass does).
    VkPipelineDepthStencilStateCreateInfo depth{VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO};
    depth.depthTestEnable = VK_FALSE;
    depth.depthWriteEnable = VK_FALSE;
    depth.depthCompareOp = VK_COMPARE_OP_ALWAYS;
    depth.minDepthBounds = 0.0f;
    depth.maxDepthBounds = 1.0f;

    VkPipelineColorBlendStateCreateInfo cb{VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO};
    cb.attachmentCount = 1;
    cb.pAttachments = &blend;

    const VkDynamicState dyn[] = {VK_DYNAMIC_STATE_VIEWPORT, VK_DYNAMIC_STATE_SCISSOR};
    VkPipelineDynamicStateCreateInfo ds{VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO};
    ds.dynamicStateCount = 2;
    ds.pDynamicStates = dyn;

    VkGraphicsPipelineCreateInfo pi{VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO};
    pi.stageCount = 2;
    pi.pStages = stages;
    pi.pVertexInputState = &vin;
    pi.pInputAssemblyState = &ia;
    pi.pViewportState = &vp;
    pi.pRasterizationState = &rs;
    pi.pMultisampleState = &ms;
    pi.pDepthStencilState = &depth;
    pi.pColorBlendState = &cb;
    pi.pDynamicState = &ds;
    pi.layout = d.layout;
    pi.renderPass = d.renderPass;
    pi.subpass = 0;

    VkPipeline pipeline = VK_NULL_HANDLE;
    const VkResult r = vkCreateGraphicsPipelines(device, VK_NULL_HANDLE, 1, &pi, nullptr, &pipeline);
    vkDestroyShaderModule(device, vert, nullptr);
    vkDestroyShaderModule(device, frag, nullptr);
    check(r, "vkCreateGraphicsPipelines");
    return pipeline;
}

VkDescriptorSetLayout createSamplerSetLayout(VkDevice device, uint32_t count) {
    std::vector<VkDescriptorSetLayoutBinding> bindings(count);
    for (uint32_t i = 0; i < count; ++i) {
        bindings[i].binding = i;
        bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER;
        bindings[i].descriptorCount = 1;
        bindings[i].stageFlags = VK_SHADER_STAGE_FRAGMENT_BIT;
    }
    VkDescriptorSetLayoutCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    ci.bindingCount = count;
    ci.pBindings = bindings.data();
    VkDescriptorSetLayout layout = VK_NULL_HANDLE;
    check(vkCreateDescriptorSetLayout(device, &ci, nullptr, &layout), "vkCreateDescriptorSetLayout");
    return layout;
}

VkPipelineLayout createPipelineLayout(VkDevice device, VkDescriptorSetLayout setLayout,
                                      VkShaderStageFlags pushStages, uint32_t pushBytes) {
    VkPushConstantRange range{pushStages, 0, pushBytes};
    VkPipelineLayoutCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    ci.setLayoutCount = setLayout ? 1 : 0;
    ci.pSetLayouts = setLayout ? &setLayout : nullptr;
    ci.pushConstantRangeCount = pushBytes ? 1 : 0;
    ci.pPushConstantRanges = pushBytes ? &range : nullptr;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    check(vkCreatePipelineLayout(device, &ci, nullptr, &layout), "vkCreatePipelineLayout");
    return layout;
}

VkDescriptorPool createSamplerPool(VkDevice device, uint32_t sets, uint32_t samplersPerSet) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, sets * samplersPerSet};
    VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    ci.maxSets = sets;
    ci.poolSizeCount = 1;
    ci.pPoolSizes = &size;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    check(vkCreateDescriptorPool(device, &ci, nullptr, &pool), "vkCreateDescriptorPool");
    return pool;
}

VkDescriptorSet allocateSet(VkDevice device, VkDescriptorPool pool, VkDescriptorSetLayout layout) {
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    check(vkAllocateDescriptorSets(device, &ai, &set), "vkAllocateDescriptorSets");
    return set;
}

void writeSampler(VkDevice device, VkDescriptorSet set, uint32_t binding, VkImageView view, VkSampler sampler) {
    VkDescriptorImageInfo info{sampler, view, VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL};
    VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstSet = set;
    w.dstBinding = binding;
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER;
    w.pImageInfo = &info;
    vkUpdateDescriptorSets(device, 1, &w, 0, nullptr);
}

VkSampler createSampler(VkDevice device, VkFilter filter, VkSamplerMipmapMode mipmapMode, float maxLod) {
    VkSamplerCreateInfo si{VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO};
    si.magFilter = filter;
    si.minFilter = filter;
    si.mipmapMode = mipmapMode;
    si.addressModeU = VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE;
    si.addressModeV = VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE;
    si.addressModeW = VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE;
    si.minLod = 0.0f;
    si.maxLod = maxLod;
    si.borderColor = VK_BORDER_COLOR_FLOAT_TRANSPARENT_BLACK;
    VkSampler s = VK_NULL_HANDLE;
    check(vkCreateSampler(device, &si, nullptr, &s), "vkCreateSampler");
    return s;
}

NdcRect imageRectNdc(const View& view, int imageW, int imageH, uint32_t vw, uint32_t vh) {
    double sx0, sy0, sx1, sy1;
    view.imageToScreen(0.0, 0.0, int(vw), int(vh), sx0, sy0);
    view.imageToScreen(double(imageW), double(imageH), int(vw), int(vh), sx1, sy1);
    // Vulkan NDC: x and y in -1..1, y pointing down (top of the framebuffer at -1).
    return {float(sx0 / vw * 2.0 - 1.0), float(sy0 / vh * 2.0 - 1.0), float(sx1 / vw * 2.0 - 1.0),
            float(sy1 / vh * 2.0 - 1.0)};
}

} // namespace glimpse::render::vk
