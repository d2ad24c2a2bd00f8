// `glimpse info`'s summaries: what a checkpoint is (family, architecture, parameters, size,
// where it was trained), and what a file that is not HDF5 is and which command opens it.
#include "core/info.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "core/h5/h5.h"
#include "core/io/video.h"
#include "core/run_files.h"
#include "core/runlog.h"
#include "core/util/path.h"

namespace glimpse {

namespace {

namespace fs = std::filesystem;

std::string familyTitle(const std::string& family) {
    if (family == "letr") return "LETR";
    if (family == "coat") return "CoaT";
    if (family == "constellation") return "ConstellationNet";
    if (family == "efficientzero") return "EfficientZero";
    if (family == "xtra") return "XTRA";
    return family;
}

// A config value on one line: arrays of numbers compact ("[32,64,128,160]").
std::string valueText(const nlohmann::json& v) {
    if (v.is_string()) return v.get<std::string>();
    std::string s = v.dump();
    return s.size() <= 60 ? s : s.substr(0, 57) + "...";
}

// The model config keys that say what the architecture is, in the order they are shown (those a
// config has; the others are in the attribute list below the summary).
const std::vector<std::string>& architectureKeys() {
    static const std::vector<std::string> keys{
        "variant", "backbone", "stages", "hidden_dim", "embed_dims", "channels", "serial_depths", "parallel_depth",
        "coarse_enc_layers", "coarse_dec_layers", "fine_enc_layers", "fine_dec_layers", "num_heads", "nheads", "heads",
        "num_queries", "coarse_queries", "clusters", "blocks", "num_blocks", "image_size", "short_side", "observation_shape", "actions",
        "num_actions", "use_cpe", "use_crpe"};
    return keys;
}

std::string architectureLine(const nlohmann::json& cfg) {
    std::string line;
    for (const auto& k : architectureKeys())
        if (cfg.contains(k)) line += (line.empty() ? "" : ", ") + k + " " + valueText(cfg[k]);
    return line.empty() ? std::string("(no known architecture keys; the config is listed below)") : line;
}

// Parameters (elements) and tensors under /params; a training state counts its "model." ones.
void countParameters(const h5::File& f, bool trainState, long long& elements, long long& tensors) {
    elements = tensors = 0;
    if (!f.hasGroup("params")) return;
    const h5::Group params = f.group("params");
    for (const auto& n : params.children()) {
        if (!params.hasDataset(n)) continue;
        if (trainState && n.rfind("model.", 0) != 0) continue;
        elements += params.dataset(n).numElements();
        ++tensors;
    }
}

std::string withThousands(long long n) {
    std::string s = std::to_string(n);
    for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
    return s;
}

// What the run log beside a checkpoint says about its training (the folder `glimpse train`
// wrote both into); "" when there is none.
std::string trainingFromRunLog(const std::string& path) {
    const fs::path dir = fs::path(path).parent_path();
    const std::string log = findRunLog(dir.empty() ? std::string(".") : dir.string());
    std::error_code ec;
    if (!fs::is_regular_file(log, ec) || fs::equivalent(log, path, ec)) return {};
    const RunLog r = RunLog::load(log);
    std::ostringstream out;
    out.precision(4);
    int64_t steps = 0;
    for (const auto& [name, s] : r.series)
        if (s.size()) steps = std::max(steps, s.steps.back());
    out << "  training (" << log << "): " << statusName(r.status) << " at step " << steps;
    for (const char* k : {"data", "env", "game"})
        if (r.config.contains(k) && r.config[k].is_string()) out << ", " << k << " " << r.config[k].get<std::string>();
    out << "\n";
    std::string metrics;
    for (const auto& [name, t] : r.eval)
        if (t.defined() && t.numel() == 1) {
            std::ostringstream v;
            v.precision(4);
            v << name << " " << t.to(torch::kDouble).item<double>();
            metrics += (metrics.empty() ? "" : ", ") + v.str();
        }
    for (const auto& [name, s] : r.series)
        if (name.rfind("val/", 0) == 0 && s.size() && !r.eval.count("final/" + name.substr(4))) {
            std::ostringstream v;
            v.precision(4);
            v << name << " " << s.values.back() << " (step " << s.steps.back() << ")";
            metrics += (metrics.empty() ? "" : ", ") + v.str();
        }
    if (!metrics.empty()) out << "  metrics: " << metrics << "\n";
    return out.str();
}

} // namespace

std::string describeCheckpoint(const std::string& path) {
    h5::File f = h5::File::open(path);
    if (!f.hasGroup("meta")) return "  no /meta group: not a complete checkpoint\n";
    const h5::Group meta = f.group("meta");
    const std::string family = meta.hasAttr("family") ? meta.attrString("family") : "";
    const bool trainState = family.size() > 6 && family.compare(family.size() - 6, 6, "-train") == 0;
    const std::string base = trainState ? family.substr(0, family.size() - 6) : family;
    nlohmann::json cfg;
    if (meta.hasAttr("config")) cfg = nlohmann::json::parse(meta.attrString("config"), nullptr, false);
    std::ostringstream out;
    long long elements = 0, tensors = 0;
    countParameters(f, trainState, elements, tensors);
    std::error_code ec;
    const auto bytes = fs::file_size(path, ec);
    out << "  " << familyTitle(base) << (trainState ? " training state (resumable)" : " checkpoint") << ": "
        << withThousands(elements) << " parameters in " << tensors << " tensors, " << humanBytes(ec ? 0 : (long long)bytes)
        << " on disk\n";
    nlohmann::json model = cfg;
    if (trainState && cfg.is_object()) {   // {"config": {"model": {...}, ...}, "step": N, "data": D}
        out << "  state: step " << valueText(cfg.value("step", nlohmann::json("?")));
        if (cfg.contains("data")) out << ", data " << valueText(cfg["data"]);
        out << "\n";
        model = cfg.contains("config") && cfg["config"].is_object() && cfg["config"].contains("model")
                    ? cfg["config"]["model"]
                    : nlohmann::json::object();
    }
    if (model.is_object()) {
        out << "  architecture: " << architectureLine(model) << "\n";
        if (model.contains("class_names") && model["class_names"].is_array() && !model["class_names"].empty()) {
            const auto& names = model["class_names"];
            out << "  classes: " << names.size() << " (";
            for (size_t i = 0; i < std::min<size_t>(names.size(), 5); ++i) out << (i ? ", " : "") << valueText(names[i]);
            out << (names.size() > 5 ? ", ...)\n" : ")\n");
        }
    }
    std::string training;
    try {
        training = trainingFromRunLog(path);
    } catch (const std::exception& e) {
        training = std::string("  training: the run log beside it is unreadable: ") + e.what() + "\n";
    }
    out << (training.empty() ? "  training: not recorded in the file, and no run log (run.h5, runlog.h5) beside it\n"
                             : training);
    if (trainState)
        out << "  opens with: glimpse train " << base << " --out " << fs::path(path).parent_path().string()
            << " --resume (continues the run)\n";
    else if (!base.empty())
        out << "  opens with: glimpse " << path << " (the " << familyTitle(base) << " panel)\n";
    return out.str();
}

std::string describeNotHdf5(const std::string& path, bool* recognized) {
    *recognized = false;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return {};   // describeH5 says what is wrong
    const auto size = (int64_t)fs::file_size(path, ec);
    static const char sig[8] = {'\211', 'H', 'D', 'F', '\r', '\n', '\032', '\n'};
    std::ifstream in(path, std::ios::binary);
    char head[8] = {};
    in.read(head, 8);
    const std::streamsize got = in.gcount();
    for (int64_t off = 0; off + 8 <= size; off = off ? off * 2 : 512) {   // HDF5's places (after a user block)
        char buf[8];
        in.clear();
        in.seekg(off);
        if (!in.read(buf, 8)) break;
        if (std::memcmp(buf, sig, 8) == 0) return {};
    }
    const std::string ext = lowerExtension(path);
    *recognized = true;
    if (cv::haveImageReader(path)) {
        const cv::Mat im = cv::imread(path, cv::IMREAD_UNCHANGED);
        std::ostringstream out;
        out << path << ": an image (" << (ext.empty() ? std::string("?") : ext.substr(1));
        if (!im.empty()) out << ", " << im.cols << "x" << im.rows << ", " << im.channels() << " channel(s)";
        out << "), not a Glimpse HDF5 file.\n  Open it in the GUI: glimpse " << path
            << "\n  Run a model on it: glimpse infer --model letr|coat|constellation --image " << path
            << " --out trace.h5\n";
        return out.str();
    }
    if (isVideoFileName(path))
        return path + ": a video, not a Glimpse HDF5 file.\n  Open it in the GUI (frame slider): glimpse " + path + "\n";
    if (ext == ".pth" || ext == ".pt" || (got >= 2 && head[0] == 'P' && head[1] == 'K'))
        return path + ": a PyTorch (or zip) file, not a Glimpse HDF5 file.\n  Convert an official checkpoint: "
                      "/usr/bin/python3 installer/convert_letr.py or installer/convert_coat.py " + path + " --out C.h5\n";
    if (ext == ".json")
        return path + ": a JSON file, not a Glimpse HDF5 file (a trainer config is given as glimpse train FAMILY "
                      "--config " + path + ")\n";
    *recognized = false;
    return path + ": not an HDF5 file (no HDF5 signature) and not an image or video Glimpse reads; glimpse info "
                  "describes Glimpse .h5 files (checkpoints, traces, run logs, episodes)\n";
}

} // namespace glimpse
