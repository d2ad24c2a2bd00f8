// OffscreenTarget: a self-contained Vulkan instance/device, a colour image with a render pass
// and framebuffer, and a Renderer drawing into it; each render() is read back to host memory.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "renderer/renderer.h"
#include "renderer/vk_util.h"

namespace glimpse::render {
namespace {

constexpr VkFormat kFormat = VK_FORMAT_R8G8B8A8_UNORM;

bool envFlag(const char* name) {
    const char* v = std::getenv(name);
    return v && *v && std::strcmp(v, "0") != 0;
}

bool hasLayer(const char* name) {
    uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, nullptr);
    std::vector<VkLayerProperties> layers(n);
    vkEnumerateInstanceLayerProperties(&n, layers.data());
    return std::any_of(layers.begin(), layers.end(),
                       [&](const VkLayerProperties& l) { return std::strcmp(l.layerName, name) == 0; });
}

// An instance extension of the loader/driver or of `layer` (may be null).
bool hasInstanceExtension(const char* name, const char* layer) {
    uint32_t n = 0;
    vkEnumerateInstanceExtensionProperties(layer, &n, nullptr);
    std::vector<VkExtensionProperties> exts(n);
    vkEnumerateInstanceExtensionProperties(layer, &n, exts.data());
    return std::any_of(exts.begin(), exts.end(),
                       [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

// Prints validation messages to stderr and counts the errors (user data: an int).
VKAPI_ATTR VkBool32 VKAPI_CALL printValidationMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                      VkDebugUtilsMessageTypeFlagsEXT,
                                                      const VkDebugUtilsMessengerCallbackDataEXT* data, void* errors) {
    if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
        ++*static_cast<int*>(errors);
    const char* level = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT     ? "error"
                        : severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT ? "warning"
                                                                                       : "info";
    std::fprintf(stderr, "[vulkan %s] %s\n", level, data->pMessage);
    return VK_FALSE;
}

int deviceRank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

} // namespace

struct OffscreenTarget::Impl {
    VkInstance instance = VK_NULL_HANDLE;
    VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
    bool validation = false;
    int validationErrors = 0;
    VkPhysicalDevice physical = VK_NULL_HANDLE;
    std::string name;
    uint32_t family = 0;
    VkDevice device = VK_NULL_HANDLE;
    VkQueue queue = VK_NULL_HANDLE;
    VkPhysicalDeviceMemoryProperties memory{};
    VkRenderPass renderPass = VK_NULL_HANDLE;
    VkSampleCountFlagBits samples = VK_SAMPLE_COUNT_1_BIT;
    uint32_t framesInFlight = 1;
    bool deferredUploads = true;
    uint32_t frameIndex = 0;
    VkFormat depthFormat = VK_FORMAT_UNDEFINED;   // none unless Options::depthStencil
    VkCommandPool pool = VK_NULL_HANDLE;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    std::optional<Renderer> renderer;

    // Size-dependent objects.
    int width = 0, height = 0;
    VkImage image = VK_NULL_HANDLE;
    VkDeviceMemory imageMemory = VK_NULL_HANDLE;
    VkImageView view = VK_NULL_HANDLE;
    VkImage msaaImage = VK_NULL_HANDLE;   // with samples > 1: drawn into, resolved into `image`
    VkDeviceMemory msaaMemory = VK_NULL_HANDLE;
    VkImageView msaaView = VK_NULL_HANDLE;
    VkImage depthImage = VK_NULL_HANDLE;
    VkDeviceMemory depthMemory = VK_NULL_HANDLE;
    VkImageView depthView = VK_NULL_HANDLE;
    VkFramebuffer framebuffer = VK_NULL_HANDLE;
    vk::Buffer readback;

    Impl(int w, int h, const Options& options)
        : samples(options.samples), framesInFlight(options.framesInFlight), deferredUploads(options.deferredUploads) {
        if (w <= 0 || h <= 0)
            throw std::invalid_argument("OffscreenTarget: size must be positive");
        if (framesInFlight < 1)
            throw std::invalid_argument("OffscreenTarget: framesInFlight must be at least 1");
        try {
            createInstance();
            pickDevice();
            createDevice();
            if (options.depthStencil)
                pickDepthFormat();
            createRenderPass();
            createCommands();
            DeviceContext ctx{instance, physical, device, queue, family};
            renderer.emplace(ctx, renderPass, kFormat, samples, framesInFlight);
            createTarget(w, h);
        } catch (...) {
            release();
            throw;
        }
    }
    ~Impl() { release(); }

    void createInstance() {
        VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
        app.pApplicationName = "Glimpse";
        app.applicationVersion = VK_MAKE_VERSION(0, 1, 0);
        app.pEngineName = "glimpse_renderer";
        app.apiVersion = VK_API_VERSION_1_0;

        std::vector<const char*> layers, extensions;
        validation = envFlag("GLIMPSE_VK_VALIDATION") && hasLayer("VK_LAYER_KHRONOS_validation");
        if (envFlag("GLIMPSE_VK_VALIDATION") && !validation)
            std::fprintf(stderr, "GLIMPSE_VK_VALIDATION: VK_LAYER_KHRONOS_validation is not installed\n");
        const bool debugUtils = validation && (hasInstanceExtension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME, nullptr) ||
                                               hasInstanceExtension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME,
                                                                    "VK_LAYER_KHRONOS_validation"));
        if (validation)
            layers.push_back("VK_LAYER_KHRONOS_validation");
        if (debugUtils)
            extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);

        VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
        ci.pApplicationInfo = &app;
        ci.enabledLayerCount = uint32_t(layers.size());
        ci.ppEnabledLayerNames = layers.data();
        ci.enabledExtensionCount = uint32_t(extensions.size());
        ci.ppEnabledExtensionNames = extensions.data();
        vk::check(vkCreateInstance(&ci, nullptr, &instance), "vkCreateInstance");

        if (debugUtils) {
            auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
                vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
            if (create) {
                VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
                mi.messageSeverity =
                    VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
                mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                                 VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                 VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
                mi.pfnUserCallback = printValidationMessage;
                mi.pUserData = &validationErrors;
                vk::check(create(instance, &mi, nullptr, &messenger), "vkCreateDebugUtilsMessengerEXT");
            }
        }
    }

    void pickDevice() {
        uint32_t n = 0;
        vk::check(vkEnumeratePhysicalDevices(instance, &n, nullptr), "vkEnumeratePhysicalDevices");
        std::vector<VkPhysicalDevice> devices(n);
        vk::check(vkEnumeratePhysicalDevices(instance, &n, devices.data()), "vkEnumeratePhysicalDevices");
        const char* wanted = std::getenv("GLIMPSE_VK_DEVICE");
        int bestRank = 1 << 30;
        std::string seen;
        for (VkPhysicalDevice pd : devices) {
            VkPhysicalDeviceProperties props;
            vkGetPhysicalDeviceProperties(pd, &props);
            seen += std::string(seen.empty() ? "" : ", ") + props.deviceName;
            uint32_t qn = 0;
            vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, nullptr);
            std::vector<VkQueueFamilyProperties> queues(qn);
            vkGetPhysicalDeviceQueueFamilyProperties(pd, &qn, queues.data());
            auto graphics = std::find_if(queues.begin(), queues.end(), [](const VkQueueFamilyProperties& q) {
                return q.queueCount > 0 && (q.queueFlags & VK_QUEUE_GRAPHICS_BIT);
            });
            if (graphics == queues.end())
                continue;
            if (wanted && *wanted && std::string(props.deviceName).find(wanted) == std::string::npos)
                continue;
            const int rank = deviceRank(props.deviceType);
            if (rank < bestRank) {
                bestRank = rank;
                physical = pd;
                name = props.deviceName;
                family = uint32_t(graphics - queues.begin());
            }
        }
        if (physical == VK_NULL_HANDLE) {
            std::string msg = "OffscreenTarget: no Vulkan device with a graphics queue";
            if (wanted && *wanted)
                msg += std::string(" matching GLIMPSE_VK_DEVICE=\"") + wanted + "\"";
            msg += seen.empty() ? " (no devices: is a Vulkan driver such as mesa-vulkan-drivers installed?)"
                                : " (found: " + seen + ")";
            throw VulkanError(msg);
        }
        vkGetPhysicalDeviceMemoryProperties(physical, &memory);
        VkPhysicalDeviceProperties props;
        vkGetPhysicalDeviceProperties(physical, &props);
        if (!(props.limits.framebufferColorSampleCounts & samples))
            throw VulkanError("OffscreenTarget: " + name + " cannot draw with " + std::to_string(int(samples)) +
                              " samples per pixel");
    }

    void createDevice() {
        const float priority = 1.0f;
        VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
        qi.queueFamilyIndex = family;
        qi.queueCount = 1;
        qi.pQueuePriorities = &priority;
        VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
        ci.queueCreateInfoCount = 1;
        ci.pQueueCreateInfos = &qi;
        vk::check(vkCreateDevice(physical, &ci, nullptr, &device), "vkCreateDevice");
        vkGetDeviceQueue(device, family, 0, &queue);
    }

    void pickDepthFormat() {
        for (VkFormat f : {VK_FORMAT_D24_UNORM_S8_UINT, VK_FORMAT_D32_SFLOAT_S8_UINT, VK_FORMAT_D16_UNORM_S8_UINT}) {
            VkFormatProperties fp;
            vkGetPhysicalDeviceFormatProperties(physical, f, &fp);
            if (fp.optimalTilingFeatures & VK_FORMAT_FEATURE_DEPTH_STENCIL_ATTACHMENT_BIT) {
                depthFormat = f;
                return;
            }
        }
        throw VulkanError("OffscreenTarget: " + name + " has no depth-stencil format");
    }

    void createRenderPass() {
        // Attachments in QVulkanWindow's order: the colour image drawn into, the optional
        // depth-stencil, and with multisampling the single-sample image the colour resolves
        // into. The image read back is the last colour one.
        const bool msaa = samples != VK_SAMPLE_COUNT_1_BIT;
        std::vector<VkAttachmentDescription> attachments;
        VkAttachmentDescription color{};
        color.format = kFormat;
        color.samples = samples;
        color.loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR;
        color.storeOp = msaa ? VK_ATTACHMENT_STORE_OP_DONT_CARE : VK_ATTACHMENT_STORE_OP_STORE;
        color.stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE;
        color.stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE;
        color.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
        color.finalLayout = msaa ? VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL : VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
        attachments.push_back(color);
        VkAttachmentReference colorRef{0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
        VkAttachmentReference depthRef{VK_ATTACHMENT_UNUSED, VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL};
        VkAttachmentReference resolveRef{VK_ATTACHMENT_UNUSED, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
        if (depthFormat != VK_FORMAT_UNDEFINED) {
            VkAttachmentDescription depth{};
            depth.format = depthFormat;
            depth.samples = samples;
            depth.loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR;
            depth.storeOp = VK_ATTACHMENT_STORE_OP_DONT_CARE;
            depth.stencilLoadOp = VK_ATTACHMENT_LOAD_OP_CLEAR;
            depth.stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE;
            depth.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
            depth.finalLayout = VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL;
            depthRef.attachment = uint32_t(attachments.size());
            attachments.push_back(depth);
        }
        if (msaa) {
            VkAttachmentDescription resolve{};
            resolve.format = kFormat;
            resolve.samples = VK_SAMPLE_COUNT_1_BIT;
            resolve.loadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE;
            resolve.storeOp = VK_ATTACHMENT_STORE_OP_STORE;
            resolve.stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE;
            resolve.stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE;
            resolve.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
            resolve.finalLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;
            resolveRef.attachment = uint32_t(attachments.size());
            attachments.push_back(resolve);
        }
        VkSubpassDescription sub{};
        sub.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS;
        sub.colorAttachmentCount = 1;
        sub.pColorAttachments = &colorRef;
        sub.pDepthStencilAttachment = depthRef.attachment != VK_ATTACHMENT_UNUSED ? &depthRef : nullptr;
        sub.pResolveAttachments = msaa ? &resolveRef : nullptr;
        // Make the colour writes visible to the copy that reads the image back.
        VkSubpassDependency dep{};
        dep.srcSubpass = 0;
        dep.dstSubpass = VK_SUBPASS_EXTERNAL;
        dep.srcStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT;
        dep.dstStageMask = VK_PIPELINE_STAGE_TRANSFER_BIT;
        dep.srcAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT;
        dep.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
        VkRenderPassCreateInfo ci{VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO};
        ci.attachmentCount = uint32_t(attachments.size());
        ci.pAttachments = attachments.data();
        ci.subpassCount = 1;
        ci.pSubpasses = &sub;
        ci.dependencyCount = 1;
        ci.pDependencies = &dep;
        vk::check(vkCreateRenderPass(device, &ci, nullptr, &renderPass), "vkCreateRenderPass");
    }

    void createCommands() {
        VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
        pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
        pi.queueFamilyIndex = family;
        vk::check(vkCreateCommandPool(device, &pi, nullptr, &pool), "vkCreateCommandPool");
        VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        ai.commandPool = pool;
        ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        ai.commandBufferCount = 1;
        vk::check(vkAllocateCommandBuffers(device, &ai, &cmd), "vkAllocateCommandBuffers");
        VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        vk::check(vkCreateFence(device, &fi, nullptr, &fence), "vkCreateFence");
    }

    vk::Gpu gpu() const {
        vk::Gpu g;
        g.physicalDevice = physical;
        g.device = device;
        g.queue = queue;
        g.queueFamily = family;
        g.memory = memory;
        return g;
    }

    void createImage(int w, int h, VkFormat format, VkSampleCountFlagBits sampleCount, VkImageUsageFlags usage,
                     VkImage& img, VkDeviceMemory& mem, VkImageView& imgView) {
        VkImageCreateInfo ii{VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO};
        ii.imageType = VK_IMAGE_TYPE_2D;
        ii.format = format;
        ii.extent = {uint32_t(w), uint32_t(h), 1};
        ii.mipLevels = 1;
        ii.arrayLayers = 1;
        ii.samples = sampleCount;
        ii.tiling = VK_IMAGE_TILING_OPTIMAL;
        ii.usage = usage;
        ii.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
        ii.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
        vk::check(vkCreateImage(device, &ii, nullptr, &img), "vkCreateImage");
        VkMemoryRequirements req;
        vkGetImageMemoryRequirements(device, img, &req);
        VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
        ai.allocationSize = req.size;
        ai.memoryTypeIndex = gpu().memoryType(req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
        vk::check(vkAllocateMemory(device, &ai, nullptr, &mem), "vkAllocateMemory");
        vk::check(vkBindImageMemory(device, img, mem, 0), "vkBindImageMemory");
        VkImageViewCreateInfo vi{VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO};
        vi.image = img;
        vi.viewType = VK_IMAGE_VIEW_TYPE_2D;
        vi.format = format;
        const bool depth = format != kFormat;
        vi.subresourceRange = {depth ? VkImageAspectFlags(VK_IMAGE_ASPECT_DEPTH_BIT | VK_IMAGE_ASPECT_STENCIL_BIT)
                                     : VkImageAspectFlags(VK_IMAGE_ASPECT_COLOR_BIT),
                               0, 1, 0, 1};
        vk::check(vkCreateImageView(device, &vi, nullptr, &imgView), "vkCreateImageView");
    }

    void createTarget(int w, int h) {
        createImage(w, h, kFormat, VK_SAMPLE_COUNT_1_BIT,
                    VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSFER_SRC_BIT, image, imageMemory, view);
        const bool msaa = samples != VK_SAMPLE_COUNT_1_BIT;
        if (msaa)
            createImage(w, h, kFormat, samples,
                        VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSIENT_ATTACHMENT_BIT, msaaImage,
                        msaaMemory, msaaView);
        if (depthFormat != VK_FORMAT_UNDEFINED)
            createImage(w, h, depthFormat, samples,
                        VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSIENT_ATTACHMENT_BIT,
                        depthImage, depthMemory, depthView);

        // Same order as the render pass's attachments.
        std::vector<VkImageView> attachments{msaa ? msaaView : view};
        if (depthView)
            attachments.push_back(depthView);
        if (msaa)
            attachments.push_back(view);
        VkFramebufferCreateInfo fi{VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO};
        fi.renderPass = renderPass;
        fi.attachmentCount = uint32_t(attachments.size());
        fi.pAttachments = attachments.data();
        fi.width = uint32_t(w);
        fi.height = uint32_t(h);
        fi.layers = 1;
        vk::check(vkCreateFramebuffer(device, &fi, nullptr, &framebuffer), "vkCreateFramebuffer");

        readback = vk::createHostBuffer(gpu(), VkDeviceSize(w) * h * 4, VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                        VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
        width = w;
        height = h;
    }

    void destroyTarget() {
        vk::destroy(device, readback);
        if (framebuffer) vkDestroyFramebuffer(device, framebuffer, nullptr);
        if (view) vkDestroyImageView(device, view, nullptr);
        if (image) vkDestroyImage(device, image, nullptr);
        if (imageMemory) vkFreeMemory(device, imageMemory, nullptr);
        if (msaaView) vkDestroyImageView(device, msaaView, nullptr);
        if (msaaImage) vkDestroyImage(device, msaaImage, nullptr);
        if (msaaMemory) vkFreeMemory(device, msaaMemory, nullptr);
        if (depthView) vkDestroyImageView(device, depthView, nullptr);
        if (depthImage) vkDestroyImage(device, depthImage, nullptr);
        if (depthMemory) vkFreeMemory(device, depthMemory, nullptr);
        msaaView = depthView = VK_NULL_HANDLE;
        msaaImage = depthImage = VK_NULL_HANDLE;
        msaaMemory = depthMemory = VK_NULL_HANDLE;
        framebuffer = VK_NULL_HANDLE;
        view = VK_NULL_HANDLE;
        image = VK_NULL_HANDLE;
        imageMemory = VK_NULL_HANDLE;
        width = height = 0;
    }

    void release() {
        if (device) {
            vkDeviceWaitIdle(device);
            renderer.reset();
            destroyTarget();
            if (fence) vkDestroyFence(device, fence, nullptr);
            if (pool) vkDestroyCommandPool(device, pool, nullptr);   // frees cmd
            if (renderPass) vkDestroyRenderPass(device, renderPass, nullptr);
            vkDestroyDevice(device, nullptr);
            fence = VK_NULL_HANDLE;
            pool = VK_NULL_HANDLE;
            cmd = VK_NULL_HANDLE;
            renderPass = VK_NULL_HANDLE;
            device = VK_NULL_HANDLE;
        }
        if (messenger) {
            auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
                vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
            if (destroy)
                destroy(instance, messenger, nullptr);
            messenger = VK_NULL_HANDLE;
        }
        if (instance) {
            vkDestroyInstance(instance, nullptr);
            instance = VK_NULL_HANDLE;
        }
    }

    std::vector<uint8_t> render(bool readBack = true) {
        if (framebuffer == VK_NULL_HANDLE || !readback.mapped)
            throw VulkanError("OffscreenTarget::render: no target (a previous resize failed)");
        vk::check(vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer");
        VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        vk::check(vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");

        const Color bg = renderer->background();
        VkClearValue clear[3]{};   // one per attachment: colour, depth-stencil, resolve
        clear[0].color = {{bg.r, bg.g, bg.b, 1.0f}};
        clear[1].depthStencil = {1.0f, 0};
        VkRenderPassBeginInfo rp{VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO};
        rp.renderPass = renderPass;
        rp.framebuffer = framebuffer;
        rp.renderArea = {{0, 0}, {uint32_t(width), uint32_t(height)}};
        rp.clearValueCount = depthFormat != VK_FORMAT_UNDEFINED ? 2 : 1;
        rp.pClearValues = clear;
        if (deferredUploads)
            renderer->prepare(cmd, uint32_t(width), uint32_t(height), frameIndex);
        vkCmdBeginRenderPass(cmd, &rp, VK_SUBPASS_CONTENTS_INLINE);
        renderer->record(cmd, uint32_t(width), uint32_t(height), frameIndex);
        frameIndex = (frameIndex + 1) % framesInFlight;
        vkCmdEndRenderPass(cmd);

        if (readBack) {
            VkBufferImageCopy region{};
            region.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
            region.imageExtent = {uint32_t(width), uint32_t(height), 1};
            vkCmdCopyImageToBuffer(cmd, image, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, readback.buffer, 1, &region);
            VkBufferMemoryBarrier toHost{VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER};
            toHost.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
            toHost.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
            toHost.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
            toHost.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
            toHost.buffer = readback.buffer;
            toHost.size = VK_WHOLE_SIZE;
            vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 0, nullptr, 1,
                                 &toHost, 0, nullptr);
        }
        vk::check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");

        VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
        si.commandBufferCount = 1;
        si.pCommandBuffers = &cmd;
        vk::check(vkResetFences(device, 1, &fence), "vkResetFences");
        vk::check(vkQueueSubmit(queue, 1, &si, fence), "vkQueueSubmit");
        vk::check(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
        if (!readBack)
            return {};

        const auto* src = static_cast<const uint8_t*>(readback.mapped);
        return std::vector<uint8_t>(src, src + size_t(width) * size_t(height) * 4);
    }
};

OffscreenTarget::OffscreenTarget(int width, int height) : OffscreenTarget(width, height, Options{}) {}
OffscreenTarget::OffscreenTarget(int width, int height, const Options& options)
    : d(std::make_unique<Impl>(width, height, options)) {}
OffscreenTarget::~OffscreenTarget() = default;

Renderer& OffscreenTarget::renderer() { return *d->renderer; }
int OffscreenTarget::width() const { return d->width; }
int OffscreenTarget::height() const { return d->height; }
std::string OffscreenTarget::deviceName() const { return d->name; }
bool OffscreenTarget::validationEnabled() const { return d->validation && d->messenger != VK_NULL_HANDLE; }
int OffscreenTarget::validationErrors() const { return d->validationErrors; }

void OffscreenTarget::resize(int width, int height) {
    if (width <= 0 || height <= 0)
        throw std::invalid_argument("OffscreenTarget::resize: size must be positive");
    if (width == d->width && height == d->height)
        return;
    vk::check(vkDeviceWaitIdle(d->device), "vkDeviceWaitIdle");
    d->destroyTarget();
    try {
        d->createTarget(width, height);
    } catch (...) {
        d->destroyTarget();   // render() refuses until a later resize succeeds
        throw;
    }
}

std::vector<uint8_t> OffscreenTarget::render() { return d->render(); }
void OffscreenTarget::renderFrame() { (void)d->render(false); }

} // namespace glimpse::render
