#include "core/eval/letr_eval.h"

#include <chrono>
#include <cstdio>
#include <sstream>

#include <torch/torch.h>

#include "core/data/lines.h"
#include "core/error.h"
#include "core/models/letr/flips.h"
#include "core/models/letr/model.h"
#include "core/runlog.h"
#include "core/train/control.h"

namespace glimpse::eval {

namespace {

std::string thresholdName(double t) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", t);
    return buf;
}

std::vector<GtLine> toGt(const torch::Tensor& lines, const std::string& name) {
    std::vector<GtLine> gt;
    if (!lines.defined() || lines.numel() == 0) return gt;
    if (lines.dim() != 2 || lines.size(1) != 4)
        throw Error("eval: sample '" + name + "' has ground truth of shape " +
                    std::to_string(lines.dim()) + "-D, expected [M, 4]");
    auto l = lines.to(torch::kCPU).to(torch::kFloat).contiguous();
    const float* p = l.data_ptr<float>();
    for (int64_t i = 0; i < l.size(0); ++i) gt.push_back({p[4 * i], p[4 * i + 1], p[4 * i + 2], p[4 * i + 3]});
    return gt;
}

struct TrainingFlagRestore {
    explicit TrainingFlagRestore(letr::LetrModel& m) : model(m), was(m.is_training()) {}
    ~TrainingFlagRestore() { model.train(was); }
    letr::LetrModel& model;
    bool was;
};

torch::Tensor scalar(double v) { return torch::tensor(v, torch::kDouble); }
torch::Tensor column(const std::vector<double>& v) {
    return torch::tensor(torch::ArrayRef<double>(v.data(), v.size()), torch::kDouble).clone();
}

void putCurve(std::map<std::string, torch::Tensor>& out, const std::string& base, const PrCurve& c,
              size_t maxPoints) {
    const PrCurve s = c.subsampled(maxPoints);
    out[base + "/precision"] = column(s.precision);
    out[base + "/recall"] = column(s.recall);
    out[base + "/score"] = column(s.score);
}

} // namespace

std::vector<EvalRow> letrEvalRows(const letr::LetrModel& model, const LetrEvalOptions& options) {
    std::vector<EvalRow> rows;
    const int numStages = model.config().fineStage && !options.coarseOnly ? 2 : 1;
    for (int si = 0; si < numStages; ++si) {
        const auto stage = letr::Stage(si);
        const int L = model.numDecoderLayers(stage);
        const std::string sn = letr::stageName(stage);
        for (int l = options.allLayers ? 0 : L - 1; l < L; ++l)
            rows.push_back({sn + "_" + std::to_string(l + 1), sn + " " + std::to_string(l + 1), {}});
    }
    if (options.lsd) rows.push_back({"lsd", "LSD", {}});
    if (options.mlsd) rows.push_back({"mlsd", "M-LSD", {}});
    return rows;
}

const EvalRow& LetrEvalResult::row(const std::string& key) const {
    for (const auto& r : rows)
        if (r.key == key) return r;
    throw Error("eval: no row '" + key + "' in the result");
}

LetrEvalResult evaluateLetr(letr::LetrModel& model, const data::LineDataset& data,
                            const LetrEvalOptions& options, const EvalProgressFn& progress,
                            train::Control* control) {
    const auto t0 = std::chrono::steady_clock::now();
    letr::checkFlipViews(options.flips, "eval: flips");
    int64_t total = data.size();
    if (options.maxImages >= 0) total = std::min(total, options.maxImages);

    struct Slot {
        letr::Stage stage;
        int layer;
        LineEvaluator ev;
    };
    std::vector<Slot> slots;
    std::vector<EvalRow> rows;
    const int numStages = model.config().fineStage && !options.coarseOnly ? 2 : 1;
    for (int si = 0; si < numStages; ++si) {
        const auto stage = letr::Stage(si);
        const int L = model.numDecoderLayers(stage);
        for (int l = options.allLayers ? 0 : L - 1; l < L; ++l) {
            slots.push_back({stage, l, LineEvaluator(options.thresholds)});
            const std::string sn = letr::stageName(stage);
            rows.push_back({sn + "_" + std::to_string(l + 1), sn + " " + std::to_string(l + 1), {}});
        }
    }
    const bool record = bool(options.onSample);
    LetrSampleEval sampleEval;
    LineEvaluator lsd(options.thresholds);
    LineEvaluator mlsd(options.thresholds);

    LetrEvalResult result;
    TrainingFlagRestore restore(model);
    model.eval();
    torch::NoGradGuard noGrad;
    for (int64_t i = 0; i < total; ++i) {
        if (control && !control->checkpoint()) {
            result.stopped = true;
            break;
        }
        const data::LineSample s = data.get(i);
        const std::vector<GtLine> gt = toGt(s.lines, s.name);
        const letr::LetrImage in = model.preprocess(s.image);
        letr::LetrForwardOptions fo;
        fo.coarseOnly = numStages == 1;
        const letr::LetrOutput out = letr::forwardFlipEnsemble(model, in.tensor, options.flips, fo);
        const float W0 = float(in.originalWidth), H0 = float(in.originalHeight);
        for (auto& slot : slots) {
            const letr::LetrStageOutput& so = out.stages[size_t(slot.stage)];
            auto lines = so.lines[slot.layer][0].to(torch::kCPU).to(torch::kFloat).contiguous();
            auto scores = torch::softmax(so.logits[slot.layer][0].to(torch::kFloat), -1)
                              .select(-1, 0).to(torch::kCPU).contiguous();
            const float* lp = lines.data_ptr<float>();
            const float* sp = scores.data_ptr<float>();
            std::vector<ScoredLine> pred(size_t(lines.size(0)));
            for (int64_t q = 0; q < lines.size(0); ++q)
                pred[size_t(q)] = {lp[4 * q] * W0, lp[4 * q + 1] * H0, lp[4 * q + 2] * W0, lp[4 * q + 3] * H0, sp[q]};
            ImageMatches m = slot.ev.add(pred, gt, s.image.cols, s.image.rows);
            if (record) {
                sampleEval.lines.push_back(std::move(pred));
                sampleEval.matches.push_back(std::move(m));
            }
        }
        // A baseline's lines and matches, recorded like a layer's.
        auto baseline = [&](LineEvaluator& ev, std::vector<ScoredLine> pred) {
            ImageMatches m = ev.add(pred, gt, s.image.cols, s.image.rows);
            if (record) {
                sampleEval.lines.push_back(std::move(pred));
                sampleEval.matches.push_back(std::move(m));
            }
        };
        if (options.lsd) baseline(lsd, detectLsd(s.image));
        if (options.mlsd) baseline(mlsd, options.mlsd(s.image));
        if (record) {
            sampleEval.index = i;
            sampleEval.name = s.name;
            sampleEval.width = s.image.cols;
            sampleEval.height = s.image.rows;
            sampleEval.gt = gt;
            options.onSample(sampleEval);
            sampleEval.lines.clear();
            sampleEval.matches.clear();
        }
        result.images = i + 1;
        if (progress) progress(i + 1, total);
    }
    for (size_t k = 0; k < slots.size(); ++k) rows[k].metrics = slots[k].ev.compute();
    if (options.lsd) rows.push_back({"lsd", "LSD", lsd.compute()});
    if (options.mlsd) rows.push_back({"mlsd", "M-LSD", mlsd.compute()});
    result.rows = std::move(rows);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
}

std::string formatEvalTable(const LetrEvalResult& result) {
    std::ostringstream os;
    if (result.rows.empty()) return "(no rows)\n";
    const auto& th = result.rows.front().metrics.thresholds;
    auto has = [&](double t) { return std::find(th.begin(), th.end(), t) != th.end(); };
    char buf[64];
    os << "layer     ";
    for (double t : th) {
        std::snprintf(buf, sizeof buf, "%8s", ("sAP" + thresholdName(t)).c_str());
        os << buf;
    }
    for (double t : {10.0, 15.0})
        if (has(t)) {
            std::snprintf(buf, sizeof buf, "%8s", ("sF" + thresholdName(t)).c_str());
            os << buf;
        }
    os << "     APH      FH   lines/img\n";
    for (const auto& r : result.rows) {
        std::snprintf(buf, sizeof buf, "%-10s", r.label.c_str());
        os << buf;
        for (double v : r.metrics.sAP) {
            std::snprintf(buf, sizeof buf, "%8.1f", 100 * v);
            os << buf;
        }
        for (double t : {10.0, 15.0})
            if (has(t)) {
                std::snprintf(buf, sizeof buf, "%8.1f", 100 * r.metrics.sFAt(t));
                os << buf;
            }
        const double perImage = r.metrics.images ? double(r.metrics.predLines) / double(r.metrics.images) : 0;
        std::snprintf(buf, sizeof buf, "%8.1f%8.1f%12.1f\n", 100 * r.metrics.APH, 100 * r.metrics.FH, perImage);
        os << buf;
    }
    return os.str();
}

std::map<std::string, torch::Tensor> evalTensors(const LetrEvalResult& result, size_t maxCurvePoints,
                                                 const std::string& prefix) {
    std::map<std::string, torch::Tensor> out;
    for (const auto& r : result.rows) {
        const std::string base = prefix + r.key + "/";
        const LineMetrics& m = r.metrics;
        for (size_t k = 0; k < m.thresholds.size(); ++k) {
            const std::string t = thresholdName(m.thresholds[k]);
            out[base + "sAP" + t] = scalar(m.sAP[k]);
            out[base + "sF" + t] = scalar(m.sF[k]);
            putCurve(out, base + "pr" + t, m.curves[k], maxCurvePoints);
        }
        out[base + "APH"] = scalar(m.APH);
        out[base + "FH"] = scalar(m.FH);
        putCurve(out, base + "prH", m.heatmapCurve, maxCurvePoints);
    }
    return out;
}

void writeEval(const LetrEvalResult& result, RunLogWriter& writer, const std::string& prefix) {
    for (const auto& kv : evalTensors(result, 512, prefix)) writer.setEval(kv.first, kv.second);
}

void saveEvalFile(const LetrEvalResult& result, const std::string& path, const nlohmann::json& config) {
    RunLog log;
    log.config = config;
    log.config["images"] = result.images;
    log.config["stopped"] = result.stopped;
    log.config["seconds"] = result.seconds;
    log.status = RunStatus::Finished;
    log.startTime = double(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count()) / 1000.0;
    log.eval = evalTensors(result);
    log.save(path);
}

} // namespace glimpse::eval
