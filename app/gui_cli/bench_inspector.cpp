// glimpse bench inspector: request-to-frame time of the LETR inspector's view changes (layer,
// head, entity, threshold, colour map) on a 1000-entity trace of a 1024x768 image, rendered
// offscreen by the Vulkan renderer (lavapipe on machines without a GPU).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <functional>
#include <random>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/util/threads.h"
#include "app/cli/cli.h"
#include "app/letr/view.h"
#include "core/error.h"
#include "core/util/timing.h"
#include "core/io/demo_image.h"
#include "core/io/image.h"
#include "core/models/letr/model.h"
#include "core/models/letr/trace.h"
#include "renderer/renderer.h"

namespace glimpse::cli {

namespace {

const char* kUsage =
    "usage: glimpse bench inspector [--trace T.h5] [--image I.png] [--queries N] [--reps R]\n"
    "                               [--size WxH] [--threads T] [--no-heatmap] [--no-lines]\n"
    "                               [--readback] [--kinds K1,K2,...]\n"
    "Builds a LETR trace of a 1024x768 image (--image resized to 1024x768, default the demo scene)\n"
    "with a randomly initialized LETR (resnet18 backbone, d 256, 8 heads, 6+6 decoder layers,\n"
    "--queries entities, default 1000; the feature grids are those of a 1024x768 input: 24x32\n"
    "coarse, 48x64 fine), or loads --trace, then times each kind of view change --reps times\n"
    "(default 60): recompute the visible lines and the selected entity's attention map, convert\n"
    "them to the viewport's buffers, render one frame offscreen at --size (default 1280x800)\n"
    "and wait for it (--readback: and read it back, as an export does; a window presents it\n"
    "instead). Prints per kind the median, 95th percentile and maximum wall time, the\n"
    "median scene-building time and the median CPU time of the whole process (all threads,\n"
    "lavapipe's included) per request, in milliseconds; 'none' redraws an unchanged scene.\n"
    "--no-heatmap / --no-lines leave that layer out (to see what each costs). --kinds: only these\n"
    "changes (none, layer, head, entity, threshold, colormap, colour: score <-> edge-support line\n"
    "colours; e.g. to profile one). Also prints the time of the image's edge field (the GUI computes\n"
    "it on a worker thread) and of every entity's edge support at every position. --threads: LibTorch\n"
    "and OpenBLAS threads (default 1; the GUI runs OpenBLAS on 1 thread too).\n";

// The trace the bench redraws: --trace, else a random LETR's on a 1024x768 image; `image` gets
// the image shown under it.
std::shared_ptr<const letr::LetrTrace> benchTrace(const Args& a, long long queries, cv::Mat& image) {
    if (a.has("--trace")) {
        auto trace = std::make_shared<const letr::LetrTrace>(letr::LetrTrace::load(*a.get("--trace")));
        const torch::Tensor img = trace->image().contiguous();
        cv::Mat in(int(img.size(0)), int(img.size(1)), CV_8UC3, img.data_ptr<uint8_t>());
        const auto orig = trace->originalSize();
        cv::resize(in, image, cv::Size(int(orig[1]), int(orig[0])));
        std::cout << "trace: " << *a.get("--trace") << "\n";
        return trace;
    }
    cv::Mat src = a.has("--image") ? loadImageRGB(*a.get("--image")) : makeDemoImage();
    cv::resize(src, image, cv::Size(1024, 768), 0, 0, cv::INTER_AREA);
    letr::LetrConfig cfg;
    cfg.backbone = "resnet18";
    cfg.hiddenDim = 256;
    cfg.nheads = 8;
    cfg.dimFeedforward = 512;
    cfg.coarseEncLayers = 1;
    cfg.fineEncLayers = 1;
    cfg.coarseDecLayers = 6;
    cfg.fineDecLayers = 6;
    cfg.numQueries = queries;
    cfg.shortSide = 768;   // 1024x768 stays 1024x768: C5 24x32, C4 48x64
    letr::LetrModel model(cfg, 0);
    const auto t0 = std::chrono::steady_clock::now();
    auto trace = std::make_shared<const letr::LetrTrace>(letr::runLetr(model, image));
    std::printf("trace: random LETR (resnet18, d 256, 8 heads, 6+6 decoder layers, N %lld) on 1024x768, "
                "forward + capture %.0f ms\n",
                queries, msSince(t0));
    return trace;
}

void printTraceShape(const letr::LetrTrace& trace) {
    const auto fc = trace.featureSize(letr::Stage::Coarse);
    std::printf("entities %lld, heads %d, positions %d, coarse grid %lldx%lld", (long long)trace.numQueries(),
                trace.numHeads(), int(app::letrPositions(trace).size()), (long long)fc[0], (long long)fc[1]);
    if (trace.numStages() == 2) {
        const auto ff = trace.featureSize(letr::Stage::Fine);
        std::printf(", fine grid %lldx%lld", (long long)ff[0], (long long)ff[1]);
    }
    std::printf("\n");
}

// One request: build the scene (lines + attention), hand what changed to the renderer (as the
// viewport does), draw a frame (and read it back).
struct FrameTimer {
    render::OffscreenTarget& target;
    app::LetrView& view;
    bool readBack = false;
    widgets::ViewportScene shown;
    double buildMs = 0, cpuMs = 0;
    uint64_t heatBuilds = 0;
    std::vector<double> heatMs;   // time of each heat texture build (colouring the grid, wall clock)

    double frame(const app::LetrViewSettings& s) {
        render::Renderer& r = target.renderer();
        const double c0 = 1e3 * processCpuSeconds();
        const auto t0 = std::chrono::steady_clock::now();
        widgets::ViewportScene sc = view.scene(s);
        buildMs = msSince(t0);
        render::Overlay o;
        o.title = "bench";
        o.rows = sc.overlayRows;
        sc.applyTo(r, &shown);
        shown = std::move(sc);
        r.setOverlay(o);
        if (readBack) (void)target.render();
        else target.renderFrame();
        cpuMs = 1e3 * processCpuSeconds() - c0;
        if (r.heatmapBuilds() != heatBuilds) {
            heatBuilds = r.heatmapBuilds();
            heatMs.push_back(r.heatmapBuildMs());
        }
        return msSince(t0);
    }
};

struct Kind {
    const char* name;
    std::function<void(int)> change;
};

// The change kinds, or those --kinds names.
std::vector<Kind> changeKinds(const Args& a, app::LetrViewSettings& s, int positions, int heads, int n,
                              std::mt19937& rng) {
    static const float thresholds[] = {0.0f, 0.3f, 0.5f, 0.7f, 0.0f, 0.9f};
    std::vector<Kind> kinds = {
        {"none", [](int) {}},   // baseline: the same scene again (render + read back only)
        {"layer", [&s, positions](int i) { s.position = i % positions; }},
        {"head", [&s, heads](int i) { s.head = (i % (heads + 1)) - 1; }},
        {"entity", [&s, &rng, n](int) { s.entity = int(rng() % uint32_t(n)); }},
        {"threshold", [&s](int i) { s.threshold = thresholds[i % 6]; }},
        {"colormap", [&s](int i) { s.colormap = render::Colormap(i % 4); }},
        {"colour", [&s](int i) { s.lineColour = i % 2 ? app::LineColour::EdgeSupport : app::LineColour::Score; }},
    };
    if (!a.has("--kinds")) return kinds;
    const std::string list = "," + *a.get("--kinds") + ",";
    std::vector<Kind> keep;
    for (auto& k : kinds)
        if (list.find("," + std::string(k.name) + ",") != std::string::npos) keep.push_back(k);
    if (keep.empty()) throw Error("--kinds: none of '" + *a.get("--kinds") + "' is a change kind");
    return keep;
}

} // namespace

int benchInspector(const std::vector<std::string>& argv) {
    if (!argv.empty() && (argv[0] == "--help" || argv[0] == "-h")) {
        std::cout << kUsage;
        return 0;
    }
    Args a(argv, {"--no-heatmap", "--no-lines", "--readback"});
    try {
        a.checkKnown({"--trace", "--image", "--queries", "--reps", "--size", "--threads", "--no-heatmap", "--no-lines",
                      "--readback", "--kinds"});
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional()[0] + "'");
    } catch (const Error& e) {
        std::cerr << "glimpse bench inspector: " << e.what() << "\n" << kUsage;
        return 2;
    }
    const long long reps = a.getInt("--reps", 60);
    const long long queries = a.getInt("--queries", 1000);
    const long long threads = a.getInt("--threads", 1);
    if (reps < 1 || queries < 1 || queries > 100000 || threads < 1)
        throw Error("--reps, --queries (<= 100000) and --threads must be >= 1");
    int vw = 1280, vh = 800;
    const std::string size = a.get("--size", "1280x800");
    if (std::sscanf(size.c_str(), "%dx%d", &vw, &vh) != 2 || vw < 16 || vh < 16 || vw > 8192 || vh > 8192)
        throw Error("--size: expected WxH between 16 and 8192, got '" + size + "'");
    glimpse::setComputeThreads(int(threads));

    cv::Mat image;
    const std::shared_ptr<const letr::LetrTrace> trace = benchTrace(a, queries, image);
    printTraceShape(*trace);

    render::OffscreenTarget target(vw, vh);
    render::Renderer& r = target.renderer();
    r.setImage(image.cols, image.rows, 3, image.data);
    r.setView(render::View::fit(image.cols, image.rows, vw, vh));
    std::cout << "renderer: " << target.deviceName() << ", frame " << vw << "x" << vh << "\n";

    app::LetrView view(trace);
    const int positions = int(view.positions().size());
    {
        for (int p = 0; p < positions; ++p) (void)view.entities(p);   // unpacked as without the field
        const auto e0 = std::chrono::steady_clock::now();
        auto field = std::make_shared<const eval::EdgeField>(eval::edgeField(image));
        const double fieldMs = msSince(e0);
        const auto e1 = std::chrono::steady_clock::now();
        view.setEdgeField(field);
        std::printf("edge field: %dx%d image %.1f ms; edge support of %lld entities x %d positions %.1f ms\n",
                    image.cols, image.rows, fieldMs, (long long)trace->numQueries(), positions, msSince(e1));
    }
    app::LetrViewSettings s;
    s.position = positions - 1;
    s.entity = 0;
    s.threshold = 0.0f;   // every entity's line drawn: the heaviest case
    s.showHeatmap = !a.has("--no-heatmap");
    s.showLines = !a.has("--no-lines");
    std::mt19937 rng(1);
    FrameTimer timer{target, view, a.has("--readback")};
    timer.heatBuilds = r.heatmapBuilds();
    for (int i = 0; i < 3; ++i) timer.frame(s);   // warm-up: pipelines, fonts, first uploads

    const auto kinds = changeKinds(a, s, positions, trace->numHeads(), int(trace->numQueries()), rng);
    std::printf("%-10s %8s %8s %8s %8s   (ms, request to frame%s, %lld reps; build = scene only)\n", "change",
                "median", "p95", "max", "build", timer.readBack ? " read back" : "", reps);
    std::printf("%-10s %8s %8s %8s %8s %8s\n", "", "", "", "", "", "cpu");
    double worst = 0;
    for (const auto& k : kinds) {
        s.position = positions - 1;
        s.head = -1;
        s.entity = 0;
        s.threshold = 0.0f;
        s.lineColour = app::LineColour::Score;
        std::vector<double> ms, build, cpu;
        for (long long i = 0; i < reps; ++i) {
            k.change(int(i + 1));
            ms.push_back(timer.frame(s));
            build.push_back(timer.buildMs);
            cpu.push_back(timer.cpuMs);
        }
        const double p95 = percentile(ms, 0.95);
        worst = std::max(worst, p95);
        std::printf("%-10s %8.2f %8.2f %8.2f %8.2f %8.2f\n", k.name, percentile(ms, 0.5), p95,
                    *std::max_element(ms.begin(), ms.end()), percentile(build, 0.5), percentile(cpu, 0.5));
    }
    const auto& heatMs = timer.heatMs;
    if (!heatMs.empty())
        std::printf("heat texture: %dx%d texels, %zu builds, median %.2f ms, max %.2f ms\n",
                    r.heatmapTextureWidth(), r.heatmapTextureHeight(), heatMs.size(), percentile(heatMs, 0.5),
                    *std::max_element(heatMs.begin(), heatMs.end()));
    std::printf("worst p95 %.2f ms (target <= 16 ms)\n", worst);
    return 0;
}

} // namespace glimpse::cli
