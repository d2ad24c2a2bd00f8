// glimpse eval letr: sAP / sF / APH / FH of a LETR checkpoint on a line dataset, one row per
// decoder layer (coarse 1..L, fine 1..L) and the LSD baseline (core/eval/letr_eval.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "app/cli/resource_path.h"
#include "app/cli/results_cli.h"
#include "app/letr/cli.h"
#include "core/util/device.h"
#include "core/util/threads.h"
#include "core/data/open.h"
#include "core/error.h"
#include "core/eval/edge_support.h"
#include "core/eval/letr_eval.h"
#include "core/eval/lsd.h"
#include "core/io/image.h"
#include "core/models/letr/trace.h"
#include "core/models/letr/model.h"
#include "core/models/mlsd/model.h"
#include "core/results/results.h"
#include "core/util/path.h"

namespace glimpse::cli {

namespace {

const char* kEvalUsage =
    "usage: glimpse eval letr --checkpoint C.h5 --data D [--layers all|last] [--out R.h5] [--keep-lines N]\n"
    "                         [--eval-out eval.h5]\n"
    "                         [--max-images N] [--no-lsd] [--short-side S] [--max-long-side M]\n"
    "                         [--flips 1|2|4] [--threads T] [--device cpu|cuda[:N]]\n"
    "                         [--no-mlsd] [--mlsd-checkpoint M.h5]\n"
    "Evaluates a LETR checkpoint on a line dataset (D: data.json, a dataset folder or\n"
    "procedural:COUNT[:SEED[:WxH[:SCENES]]]) and prints sAP5/10/15, sF10/15, APH and FH (percent) for\n"
    "every decoder layer of both stages (--layers last: the last layer of each) and for the LSD\n"
    "and M-LSD tiny baselines on the same images (M-LSD: resources/mlsd_tiny.h5 when installed). --short-side and --max-long-side override the checkpoint's input\n"
    "size (a larger long-side cap is needed to enlarge a small image). --out writes a results file\n"
    "(glimpse.results, docs/formats.md): the table, PR curves and, per image and row, the lines with\n"
    "their matches to the ground truth (written as the eval goes; Ctrl-C stops it with a summary of\n"
    "the images done); --keep-lines N keeps each row's N best lines per image (default: all, the\n"
    "per-image records then reproduce the table exactly). --eval-out writes the numbers and PR\n"
    "curves as an eval file (a finished run log). --flips 2|4 evaluates the flip ensemble: each image\n"
    "also runs mirrored (4: left-right, up-down and both) and every layer's lines are merged\n"
    "over the views (docs/decisions.md). Progress goes to stderr.\n";

const char* kEdgesUsage =
    "usage: glimpse eval edges IMAGE... [--checkpoint C.h5] [--top K] [--short-side S] [--max-long-side M]\n"
    "                          [--flips 1|2|4] [--threads T] [--figure OUT.png|OUT.jpg]\n"
    "                          [--no-mlsd] [--mlsd-checkpoint M.h5] [--snap]\n"
    "Photos have no ground truth: for the K best lines (default 50) of LETR (the last decoder\n"
    "layer of its last stage; with --checkpoint, else resources/letr_demo.h5 when present) and\n"
    "of LSD and of M-LSD tiny (resources/mlsd_tiny.h5 when installed, or --mlsd-checkpoint) on each\n"
    "image, prints the fraction of lines that lie on strong image edges (70% of\n"
    "their pixels on a gradient in the image's top 10% whose direction is within 22.5 degrees\n"
    "of the line's normal) and the mean fraction of such pixels (docs/decisions.md). --flips:\n"
    "LETR's lines from the flip ensemble, as in eval letr. --figure writes a picture with a row per\n"
    "image: LETR's K best lines, then LSD's, then M-LSD's, each line green when on an edge, yellow when 30% of\n"
    "it or more is supported, red otherwise (the best line on top); the first 100 images.\n"
    "--snap moves LETR's and M-LSD's lines onto the edge each nearly follows (up to 3 px across, as\n"
    "the M-LSD photo labels are) before measuring: rows LETR+s and MLSD+s.\n";

// --figure: each image's panels (LETR's, LSD's) side by side under a caption strip, the rows
// stacked, on a dark ground.
// At most kFigureMaxRows images go into it (JPEG stops at 65535 rows); the rest are measured.
constexpr int kFigurePanelHeight = 300, kFigureCaption = 24, kFigureGap = 6, kFigureMaxRows = 100;

cv::Mat captioned(const cv::Mat& panel, const std::string& caption) {
    cv::Mat out(panel.rows + kFigureCaption, panel.cols, CV_8UC3, cv::Scalar(24, 24, 24));
    panel.copyTo(out(cv::Rect(0, kFigureCaption, panel.cols, panel.rows)));
    // The font shrinks so that a narrow panel's caption still fits (down to a readable 0.3).
    double scale = 0.45;
    int baseline = 0;
    const int width = cv::getTextSize(caption, cv::FONT_HERSHEY_SIMPLEX, scale, 1, &baseline).width;
    if (width > panel.cols - 8) scale = std::max(0.3, scale * (panel.cols - 8) / double(width));
    cv::putText(out, caption, cv::Point(4, kFigureCaption - 7), cv::FONT_HERSHEY_SIMPLEX, scale,
                cv::Scalar(235, 235, 235), 1, cv::LINE_AA);
    return out;
}

cv::Mat stackFigure(const std::vector<std::vector<cv::Mat>>& rows) {
    int width = 0, height = 0;
    for (const auto& row : rows) {
        int w = 0, h = 0;
        for (const cv::Mat& p : row) {
            w += p.cols + (w > 0 ? kFigureGap : 0);
            h = std::max(h, p.rows);
        }
        width = std::max(width, w);
        height += h + (height > 0 ? kFigureGap : 0);
    }
    cv::Mat fig(std::max(1, height), std::max(1, width), CV_8UC3, cv::Scalar(12, 12, 12));
    int y = 0;
    for (const auto& row : rows) {
        int x = 0, h = 0;
        for (const cv::Mat& p : row) {
            p.copyTo(fig(cv::Rect(x, y, p.cols, p.rows)));
            x += p.cols + kFigureGap;
            h = std::max(h, p.rows);
        }
        y += h + kFigureGap;
    }
    return fig;
}

std::string panelCaption(const std::string& image, const char* detector, const eval::EdgeSupport& r) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s  %s: %.0f%% of %d on an edge", image.c_str(), detector, 100 * r.onEdge, r.lines);
    return buf;
}

// --snap: each line of a learned detector moved onto the edge it nearly follows, as the photo
// labels are (eval::snapToEdge); how much of a detector's miss is a pixel or two of offset.
void snapAll(const cv::Mat& rgb, std::vector<eval::ScoredLine>& lines, const eval::EdgeSupportOptions& o) {
    const eval::EdgeField field = eval::edgeField(rgb, o);
    eval::EdgeSnapOptions snap;
    snap.maxTrim = 0.25;
    for (auto& l : lines) eval::snapToEdge(field, l, o, snap);
}

// The M-LSD baseline of eval letr / eval edges: none with --no-mlsd, --mlsd-checkpoint when
// given, else the shipped model when installed (said on stderr when it is not).
std::shared_ptr<mlsd::MlsdModel> baselineMlsd(const Args& a, const char* command) {
    if (a.has("--no-mlsd")) return nullptr;
    if (!a.has("--mlsd-checkpoint") && resourcePath("mlsd_tiny.h5").empty()) {
        std::cerr << command << ": no M-LSD model (no --mlsd-checkpoint and no resources/mlsd_tiny.h5): no M-LSD row\n";
        return nullptr;
    }
    auto m = mlsdModelOption(a, "--mlsd-checkpoint");
    std::cerr << command << ": M-LSD tiny " << m->source << "\n";
    return m;
}

// --short-side / --max-long-side: the model's input size unless given.
void applyResize(const Args& a, letr::LetrModel& model) {
    if (!a.has("--short-side") && !a.has("--max-long-side")) return;
    const long long s = a.getInt("--short-side", model.config().shortSide);
    const long long m = a.getInt("--max-long-side", model.config().maxLongSide);
    if (s < 16 || s > 8192) throw Error("--short-side: expected 16..8192");
    if (m < s || m > 8192) throw Error("--max-long-side: expected --short-side..8192");
    model.setResize(s, m);
}

} // namespace

int flipsOption(const Args& a) {
    const long long f = a.getInt("--flips", 1);
    if (f != 1 && f != 2 && f != 4) throw Error("--flips: expected 1, 2 or 4, got " + std::to_string(f));
    return int(f);
}

int evalEdges(const std::vector<std::string>& argv) {
    if (argv.empty() || std::find(argv.begin(), argv.end(), "--help") != argv.end() ||
        std::find(argv.begin(), argv.end(), "-h") != argv.end()) {
        std::cout << kEdgesUsage;
        return argv.empty() ? 2 : 0;
    }
    Args a(argv, {"--no-mlsd", "--snap"});
    a.checkKnown({"--checkpoint", "--top", "--short-side", "--max-long-side", "--flips", "--threads", "--figure",
                  "--no-mlsd", "--mlsd-checkpoint", "--snap"});
    const bool snap = a.has("--snap");
    const std::string figure = a.get("--figure", "");
    bool figurePng = false;
    if (a.has("--figure")) {
        const std::string ext = lowerExtension(figure);
        if (ext != ".png" && ext != ".jpg" && ext != ".jpeg")
            throw Error("--figure " + figure + ": expected a .png, .jpg or .jpeg file name");
        figurePng = ext == ".png";
        const std::filesystem::path parent = std::filesystem::path(figure).parent_path();
        if (!parent.empty() && !std::filesystem::is_directory(parent))
            throw Error("--figure " + figure + ": the folder " + parent.string() + " does not exist");
    }
    std::vector<std::vector<cv::Mat>> figureRows;
    letr::LetrRunOptions runOpts;
    runOpts.flips = flipsOption(a);
    if (a.positional().empty()) throw Error("glimpse eval edges: no image given");
    eval::EdgeSupportOptions o;
    o.topK = int(a.getInt("--top", 50));
    if (o.topK < 1 || o.topK > 100000) throw Error("--top: expected 1..100000");
    if (a.has("--threads")) {
        const long long t = a.getInt("--threads", 1);
        if (t < 1) throw Error("--threads: expected a positive integer");
        glimpse::setComputeThreads(int(t));
    }
    std::shared_ptr<letr::LetrModel> model;
    std::string ckpt = a.get("--checkpoint", "");
    if (ckpt.empty()) ckpt = resourcePath("letr_demo.h5");   // "" when none ships
    if (!ckpt.empty()) {
        model = letr::loadLetr(ckpt);
        std::cerr << "glimpse eval edges: LETR " << ckpt << "\n";
        applyResize(a, *model);
    }
    if (!model) std::cerr << "glimpse eval edges: no LETR model (no --checkpoint and no resources/letr_demo.h5): LSD only\n";
    const std::shared_ptr<mlsd::MlsdModel> mlsdModel = baselineMlsd(a, "glimpse eval edges");
    std::printf("%-28s %-6s %6s %9s %13s\n", "image", "lines", "count", "on edge", "mean support");
    double sumLetr = 0, sumLsd = 0, sumMlsd = 0;
    for (const std::string& path : a.positional()) {
        const cv::Mat rgb = loadImageRGB(path);
        const std::string name = std::filesystem::path(path).filename().string();
        const bool inFigure = !figure.empty() && figureRows.size() < size_t(kFigureMaxRows);
        if (inFigure) figureRows.emplace_back();
        if (model) {
            const letr::LetrTrace trace = letr::runLetr(*model, rgb, runOpts);
            std::vector<eval::ScoredLine> lines;
            for (const auto& l : trace.lines(trace.lastStage(), trace.lastLayer(), 0.0f))
                lines.push_back({l.x1, l.y1, l.x2, l.y2, l.score});
            if (snap) snapAll(rgb, lines, o);
            const auto r = eval::edgeSupport(rgb, lines, o);
            std::printf("%-28s %-6s %6d %8.1f%% %13.2f\n", name.c_str(), snap ? "LETR+s" : "LETR", r.lines, 100 * r.onEdge,
                        r.meanSupport);
            sumLetr += r.onEdge;
            if (inFigure)
                figureRows.back().push_back(captioned(eval::drawEdgeSupport(rgb, lines, r, o, kFigurePanelHeight),
                                                      panelCaption(name, "LETR", r)));
        }
        const std::vector<eval::ScoredLine> lsdLines = eval::detectLsd(rgb);
        const auto r = eval::edgeSupport(rgb, lsdLines, o);
        std::printf("%-28s %-6s %6d %8.1f%% %13.2f\n", name.c_str(), "LSD", r.lines, 100 * r.onEdge, r.meanSupport);
        sumLsd += r.onEdge;
        if (inFigure)
            figureRows.back().push_back(captioned(eval::drawEdgeSupport(rgb, lsdLines, r, o, kFigurePanelHeight),
                                                  panelCaption(name, "LSD", r)));
        if (mlsdModel) {
            std::vector<eval::ScoredLine> mlsdLines = mlsd::detectMlsd(*mlsdModel, rgb);
            if (snap) snapAll(rgb, mlsdLines, o);
            const auto m = eval::edgeSupport(rgb, mlsdLines, o);
            std::printf("%-28s %-6s %6d %8.1f%% %13.2f\n", name.c_str(), snap ? "MLSD+s" : "M-LSD", m.lines, 100 * m.onEdge,
                        m.meanSupport);
            sumMlsd += m.onEdge;
            if (inFigure)
                figureRows.back().push_back(captioned(eval::drawEdgeSupport(rgb, mlsdLines, m, o, kFigurePanelHeight),
                                                      panelCaption(name, "M-LSD", m)));
        }
    }
    const double n = double(a.positional().size());
    if (model) std::printf("%-28s %-6s %6s %8.1f%%\n", "mean", snap ? "LETR+s" : "LETR", "", 100 * sumLetr / n);
    std::printf("%-28s %-6s %6s %8.1f%%\n", "mean", "LSD", "", 100 * sumLsd / n);
    if (mlsdModel) std::printf("%-28s %-6s %6s %8.1f%%\n", "mean", snap ? "MLSD+s" : "M-LSD", "", 100 * sumMlsd / n);
    if (!figure.empty()) {
        const cv::Mat fig = stackFigure(figureRows);
        if (figurePng) saveImagePNG(figure, fig);
        else saveImageJPEG(figure, fig);
        std::cerr << "glimpse eval edges: figure in " << figure;
        if (a.positional().size() > figureRows.size())
            std::cerr << " (the first " << figureRows.size() << " of " << a.positional().size() << " images)";
        std::cerr << "\n";
    }
    return 0;
}

int evalLetr(const std::vector<std::string>& argv) {
    const bool help = std::find(argv.begin(), argv.end(), "--help") != argv.end() ||
                      std::find(argv.begin(), argv.end(), "-h") != argv.end();
    if (help) {
        std::cout << kEvalUsage;
        return 0;
    }
    Args a(argv, {"--no-lsd", "--no-mlsd"});
    a.checkKnown({"--checkpoint", "--data", "--layers", "--out", "--max-images", "--no-lsd",
                  "--short-side", "--max-long-side", "--flips", "--threads", "--device", "--no-mlsd",
                  "--mlsd-checkpoint", "--keep-lines", "--eval-out"});
    const torch::Device device = parseDevice(a.get("--device", "cpu"));
    if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional().front() + "'");
    const std::string ckpt = a.require("--checkpoint");
    const std::string dataSpec = a.require("--data");
    const std::string layers = a.get("--layers", "all");
    if (layers != "all" && layers != "last") throw Error("--layers: expected all or last, got '" + layers + "'");
    if (a.has("--threads")) {
        const long long t = a.getInt("--threads", 1);
        if (t < 1) throw Error("--threads: expected a positive integer");
        glimpse::setComputeThreads(int(t));
    }
    eval::LetrEvalOptions opts;
    opts.allLayers = layers == "all";
    opts.lsd = !a.has("--no-lsd");
    opts.flips = flipsOption(a);
    opts.maxImages = a.getInt("--max-images", -1);
    if (a.has("--max-images") && opts.maxImages < 1) throw Error("--max-images: expected a positive integer");
    results::WriterOptions resultsOpts;
    resultsOpts.keepLines = a.getInt("--keep-lines", -1);
    if (a.has("--keep-lines") && resultsOpts.keepLines < 1) throw Error("--keep-lines: expected a positive integer");
    if (a.has("--keep-lines") && !a.has("--out")) throw Error("--keep-lines goes with --out R.h5");
    if (a.has("--out")) checkOutputFolder(*a.get("--out"), "--out");

    auto model = letr::loadLetr(ckpt);
    applyResize(a, *model);
    model->to(device);
    if (const std::shared_ptr<mlsd::MlsdModel> m = baselineMlsd(a, "glimpse eval")) {
        m->net->to(device);
        opts.mlsd = [m](const cv::Mat& rgb) { return mlsd::detectMlsd(*m, rgb); };
    }
    auto data = data::openLineDataset(dataSpec);
    std::cerr << "glimpse eval: " << ckpt << " (" << model->config().backbone << ", "
              << model->config().numQueries << " queries, short side " << model->config().shortSide
              << ", long side <= " << model->config().maxLongSide
              << (opts.flips > 1 ? ", flip ensemble of " + std::to_string(opts.flips) + " views" : std::string())
              << ") on " << data->describe() << "\n";

    // --out: a results file written as the images go (stopped by Ctrl-C: the images done).
    std::unique_ptr<results::ResultsWriter> writer;
    std::vector<eval::EvalRow> rowNames;
    train::Control control;
    if (a.has("--out")) {
        rowNames = eval::letrEvalRows(*model, opts);
        std::vector<results::LetrRowInfo> rows;
        for (const auto& r : rowNames) rows.push_back({r.key, r.label, r.key == "lsd" || r.key == "mlsd"});
        results::ResultsHeader h;
        h.type = results::ResultsType::Letr;
        h.family = "letr";
        h.command = commandLine("glimpse eval letr", argv);
        h.checkpoint = ckpt;
        h.source.spec = dataSpec;
        h.config = {{"layers", layers}, {"flips", opts.flips}, {"model", model->config().toJson()},
                    {"max_images", opts.maxImages}, {"keep_lines", resultsOpts.keepLines}};
        resultsOpts.expectedSamples = opts.maxImages >= 0 ? std::min<int64_t>(opts.maxImages, data->size()) : data->size();
        writer = results::ResultsWriter::createLetr(*a.get("--out"), h, rows, opts.thresholds, resultsOpts);
        opts.onSample = [&](const eval::LetrSampleEval& e) {
            results::LetrSampleIn in;
            in.index = e.index;
            in.name = e.name;
            in.width = e.width;
            in.height = e.height;
            in.gt = e.gt;
            for (size_t r = 0; r < e.lines.size(); ++r) in.rows.push_back({e.lines[r], e.matches[r]});
            writer->add(in);
        };
    }
    eval::LetrEvalResult result;
    {
        CountProgress progress("  ", " images");
        std::optional<StopOnInterrupt> interrupt;
        if (writer) interrupt.emplace(control);
        result = eval::evaluateLetr(*model, *data, opts, progress.fn(), writer ? &control : nullptr);
    }
    if (writer) {
        results::LetrSummary summary;
        summary.thresholds = opts.thresholds;
        for (const auto& r : result.rows) {
            summary.rows.push_back({r.key, r.label, r.key == "lsd" || r.key == "mlsd"});
            summary.metrics.push_back(r.metrics);
        }
        writer->finish(summary, result.stopped ? results::Status::Stopped : results::Status::Complete);
        std::cerr << "glimpse eval: wrote " << *a.get("--out") << " (" << writer->samples() << " images"
                  << (result.stopped ? ", stopped" : "") << ")\n";
    }
    std::cout << "LETR " << ckpt
              << (opts.flips > 1 ? " (flip ensemble of " + std::to_string(opts.flips) + " views)" : std::string())
              << " on " << data->describe() << ": " << result.images << " images, "
              << "sAP over squared endpoint distance in a 128 x 128 frame\n"
              << eval::formatEvalTable(result);
    std::cerr << "glimpse eval: " << result.seconds << " s\n";
    if (a.has("--eval-out")) {
        const std::string out = *a.get("--eval-out");
        eval::saveEvalFile(result, out, {{"kind", "letr_eval"}, {"checkpoint", ckpt}, {"data", dataSpec},
                                         {"layers", layers}, {"flips", opts.flips},
                                         {"model", model->config().toJson()}});
        std::cerr << "glimpse eval: wrote " << out << "\n";
    }
    return 0;
}

} // namespace glimpse::cli
