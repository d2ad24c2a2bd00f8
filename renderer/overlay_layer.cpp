#include "renderer/overlay_layer.h"

#include <algorithm>
#include <cfloat>
#include <mutex>

#include "imgui.h"
#include "imgui_impl_vulkan.h"

namespace glimpse::render {
namespace {

// Dear ImGui's current context is one process-wide pointer, and overlays are rendered on more
// than one thread (the viewport on the GUI thread, a view export or an offscreen render on a
// worker). Unguarded, one thread's scope switched the other's context in the middle of its
// frame (ImGui::NewFrame then asserted "Font Atlas not built" on the other overlay's context).
// Every use of ImGui here holds this lock; recursive, as scopes nest in the constructor.
std::recursive_mutex& imguiMutex() {
    static std::recursive_mutex m;
    return m;
}

// Makes `ctx` the current ImGui context for a scope (holding imguiMutex) and restores the
// previous one.
class ContextScope {
public:
    explicit ContextScope(ImGuiContext* ctx) : lock_(imguiMutex()), previous_(ImGui::GetCurrentContext()) {
        ImGui::SetCurrentContext(ctx);
    }
    ~ContextScope() { ImGui::SetCurrentContext(previous_); }
    ContextScope(const ContextScope&) = delete;
    ContextScope& operator=(const ContextScope&) = delete;

private:
    std::unique_lock<std::recursive_mutex> lock_;   // declared first: held while previous_ is read and restored
    ImGuiContext* previous_;
};

void checkBackendResult(VkResult r) { vk::check(r, "ImGui Vulkan backend"); }

bool sameOverlay(const Overlay& a, const Overlay& b) {
    return a.visible == b.visible && a.title == b.title && a.rows == b.rows;
}

bool sameRect(const RectF& a, const RectF& b) {
    return a.x == b.x && a.y == b.y && a.w == b.w && a.h == b.h;
}

constexpr float kMargin = 8.0f;
constexpr float kBackgroundAlpha = 0.6f;

} // namespace

OverlayLayer::OverlayLayer(const DeviceContext& ctx, const vk::Gpu& gpu, VkRenderPass renderPass,
                           VkSampleCountFlagBits samples, uint32_t framesInFlight)
    : gpu_(gpu) {
    overlay_.visible = false;
    std::lock_guard<std::recursive_mutex> lock(imguiMutex());   // CreateContext switches the current context too
    context_ = ImGui::CreateContext();
    ContextScope scope(context_);
    try {
        ImGuiIO& io = ImGui::GetIO();
        io.IniFilename = nullptr;   // no imgui.ini
        io.LogFilename = nullptr;
        io.ConfigFlags |= ImGuiConfigFlags_NoMouseCursorChange;
        ImGui::StyleColorsDark();
        ImGuiStyle& style = ImGui::GetStyle();
        style.WindowRounding = 4.0f;
        style.WindowBorderSize = 0.0f;

        pool_ = vk::createSamplerPool(gpu.device, 1, 1);   // the font texture's set
        ImGui_ImplVulkan_InitInfo info{};
        info.Instance = ctx.instance;
        info.PhysicalDevice = gpu.physicalDevice;
        info.Device = gpu.device;
        info.QueueFamily = gpu.queueFamily;
        info.Queue = gpu.queue;
        info.DescriptorPool = pool_;
        info.Subpass = 0;
        // The backend cycles through ImageCount vertex/index buffers, one per rendered frame;
        // one more than the frames in flight keeps a buffer from being rewritten in use.
        info.MinImageCount = 2;
        info.ImageCount = std::max<uint32_t>(2, framesInFlight + 1);
        info.MSAASamples = samples;
        info.CheckVkResultFn = checkBackendResult;
        ImGui_ImplVulkan_Init(&info, renderPass);
        backendReady_ = true;
    } catch (...) {
        if (backendReady_)
            ImGui_ImplVulkan_Shutdown();
        if (pool_)
            vkDestroyDescriptorPool(gpu.device, pool_, nullptr);
        ImGui::DestroyContext(context_);
        throw;
    }
}

OverlayLayer::~OverlayLayer() {
    std::lock_guard<std::recursive_mutex> lock(imguiMutex());   // DestroyContext may reset the current one
    {
        ContextScope scope(context_);
        if (backendReady_)
            ImGui_ImplVulkan_Shutdown();
    }
    if (pool_)
        vkDestroyDescriptorPool(gpu_.device, pool_, nullptr);
    ImGui::DestroyContext(context_);
}

void OverlayLayer::set(const Overlay& o) {
    if (sameOverlay(o, overlay_))
        return;
    overlay_ = o;
    changed_ = true;
}

void OverlayLayer::setMousePos(float x, float y) {
    mouseX_ = x;
    mouseY_ = y;
}

void OverlayLayer::prepare(vk::UploadBatch& batch, uint32_t width, uint32_t height) {
    drawn_ = false;
    if (!overlay_.visible || (overlay_.title.empty() && overlay_.rows.empty()) || width == 0 || height == 0)
        return;
    ContextScope scope(context_);

    if (!fontsUploaded_) {
        ImGui_ImplVulkan_CreateFontsTexture(batch.cmd());
        fontsUploaded_ = true;
        ImGuiContext* ctx = context_;
        batch.afterSubmit([ctx] {
            ContextScope s(ctx);
            ImGui_ImplVulkan_DestroyFontUploadObjects();
        });
    }

    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(float(width), float(height));
    io.DisplayFramebufferScale = ImVec2(1.0f, 1.0f);
    io.MousePos = (mouseX_ >= 0 && mouseY_ >= 0) ? ImVec2(mouseX_, mouseY_) : ImVec2(-FLT_MAX, -FLT_MAX);
    const auto now = std::chrono::steady_clock::now();
    const float dt = lastFrame_.time_since_epoch().count() == 0
                         ? 1.0f / 60.0f
                         : std::chrono::duration<float>(now - lastFrame_).count();
    lastFrame_ = now;

    // An auto-resizing window is sized from the previous frame's content (and a new one is
    // hidden for its first frame), so after a change build frames until the size settles;
    // only the last frame's draw data is drawn.
    const int maxFrames = changed_ ? 4 : 1;
    RectF previous{-1, -1, -1, -1};
    for (int i = 0; i < maxFrames; ++i) {
        io.DeltaTime = i == 0 ? std::max(dt, 1e-4f) : 1e-4f;
        ImGui_ImplVulkan_NewFrame();
        ImGui::NewFrame();
        buildWindow();
        ImGui::Render();
        if (i > 0 && sameRect(rect_, previous))
            break;
        previous = rect_;
    }
    changed_ = false;
    drawn_ = true;
}

void OverlayLayer::buildWindow() {
    const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize |
                                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoFocusOnAppearing |
                                   ImGuiWindowFlags_NoNav | ImGuiWindowFlags_NoMove;
    ImGui::SetNextWindowPos(ImVec2(kMargin, kMargin), ImGuiCond_Always);
    ImGui::SetNextWindowBgAlpha(kBackgroundAlpha);
    if (ImGui::Begin("##glimpse_overlay", nullptr, flags)) {
        const ImGuiStyle& style = ImGui::GetStyle();
        if (!overlay_.title.empty()) {
            // The built-in font has no bold face: draw the title twice, one pixel apart.
            const ImVec2 at = ImGui::GetCursorScreenPos();
            ImGui::TextUnformatted(overlay_.title.c_str());
            ImGui::GetWindowDrawList()->AddText(ImVec2(at.x + 1.0f, at.y), ImGui::GetColorU32(ImGuiCol_Text),
                                                overlay_.title.c_str());
            if (!overlay_.rows.empty())
                ImGui::Separator();
        }
        float labelWidth = 0.0f;
        for (const auto& row : overlay_.rows)
            labelWidth = std::max(labelWidth, ImGui::CalcTextSize(row.first.c_str()).x);
        const float valueX = style.WindowPadding.x + labelWidth + 2.0f * style.ItemSpacing.x;
        for (const auto& row : overlay_.rows) {
            ImGui::PushStyleColor(ImGuiCol_Text, style.Colors[ImGuiCol_TextDisabled]);
            ImGui::TextUnformatted(row.first.c_str());
            ImGui::PopStyleColor();
            ImGui::SameLine(valueX);
            ImGui::TextUnformatted(row.second.c_str());
        }
        const ImVec2 pos = ImGui::GetWindowPos();
        const ImVec2 size = ImGui::GetWindowSize();
        rect_ = RectF{pos.x, pos.y, size.x, size.y};
    }
    ImGui::End();
}

void OverlayLayer::draw(VkCommandBuffer cmd) {
    if (!drawn_)
        return;
    ContextScope scope(context_);
    ImGui_ImplVulkan_RenderDrawData(ImGui::GetDrawData(), cmd);
}

} // namespace glimpse::render
