// glimpse_fuzz_seeds OUT_DIR: writes the generated part of the seed corpora (fuzz/corpus/<target>/)
// with Glimpse's own writers: checkpoints of the small models (fuzz/small_models.h), their traces,
// run logs (final and live SWMR), an episode, images, a video, idx files, configs, dataset specs.
// tools/fuzz_seeds.sh runs it and adds the replay fixtures of tests/fixtures/make_replay_fixtures.py.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>
#include <torch/torch.h>
#include <zlib.h>

#include "core/data/classification.h"
#include "core/error.h"
#include "core/io/checkpoint.h"
#include "core/io/image.h"
#include "core/models/coat/model.h"
#include "core/models/coat/trace.h"
#include "core/models/coat/train.h"
#include "core/models/constellation/model.h"
#include "core/models/constellation/trace.h"
#include "core/models/constellation/train.h"
#include "core/models/efficientzero/model.h"
#include "core/models/efficientzero/train.h"
#include "core/models/letr/model.h"
#include "core/models/letr/trace.h"
#include "core/models/letr/train.h"
#include "core/rl/episode.h"
#include "core/models/efficientzero/train.h"
#include "core/models/xtra/dataset.h"
#include "core/runlog.h"
#include "fuzz/small_models.h"

using namespace glimpse;
namespace fs = std::filesystem;

namespace {

fs::path root;

std::string dir(const std::string& target) {
    const fs::path d = root / target;
    fs::create_directories(d);
    return d.string();
}

void text(const std::string& target, const std::string& name, const std::string& content) {
    std::ofstream(fs::path(dir(target)) / name, std::ios::binary) << content;
}

cv::Mat pattern(int h, int w) {
    cv::Mat m(h, w, CV_8UC3);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(uchar(16 * x), uchar(16 * y), uchar(8 * (x + y)));
    return m;
}

void checkpointsAndTraces() {
    torch::manual_seed(0);
    letr::LetrModel lm(fuzz::smallLetr());
    // LETR's backbone has ResNet widths whatever the config (about 5M parameters for resnet10):
    // the seed keeps the transformer and heads only, so it stays small (applyCheckpoint then
    // reports the missing backbone tensors; the other families' seeds reach the success path).
    Checkpoint lc = checkpointFromModule(lm, "letr", lm.config().toJsonString());
    for (auto it = lc.tensors.begin(); it != lc.tensors.end();)
        it = it->first.rfind("backbone", 0) == 0 ? lc.tensors.erase(it) : std::next(it);
    saveCheckpoint(dir("fuzz_checkpoint_letr") + "/letr.h5", lc);
    letr::runLetr(lm, pattern(24, 32)).save(dir("fuzz_trace") + "/letr.h5");

    coat::CoatModel cm(fuzz::smallCoat());
    coat::saveCoat(cm, dir("fuzz_checkpoint_coat") + "/coat.h5");
    coat::runCoat(cm, pattern(32, 32)).save(dir("fuzz_trace") + "/coat.h5");

    constellation::ConstellationModel km(fuzz::smallConstellation());
    constellation::saveConstellation(km, dir("fuzz_checkpoint_constellation") + "/constellation.h5");
    constellation::ConstellationTrace::capture(km, pattern(16, 16)).save(dir("fuzz_trace") + "/constellation.h5");

    const auto ez = fuzz::smallEfficientZero();
    efficientzero::Network net(ez);
    saveCheckpoint(dir("fuzz_checkpoint_efficientzero") + "/efficientzero.h5",
                   checkpointFromModule(net.module(), "efficientzero", ez.toJson().dump()));

    Trace plain("other");
    plain.meta()["note"] = "a trace of a family without a typed reader";
    plain.set("a/b", torch::arange(6, torch::kFloat32).reshape({2, 3}));
    plain.save(dir("fuzz_trace") + "/plain.h5");
}

void runLogs() {
    RunLog log;
    log.config = {{"steps", 10}, {"lr", 0.001}};
    log.status = RunStatus::Finished;
    log.startTime = 1.7e9;
    for (int i = 0; i < 4; ++i) log.series["loss"].append(i, 0.5 * i, 1.0 / (i + 1));
    log.series["val/sAP"].append(3, 1.5, 0.25);
    log.eval["confusion"] = torch::tensor({{5, 1}, {2, 7}});
    log.eval["pr/recall"] = torch::linspace(0, 1, 5);
    log.writer.host = "seed";
    log.writer.pid = 1;
    log.writer.heartbeatInterval = 2;
    log.writer.heartbeat = 1.7e9;
    log.save(dir("fuzz_runlog") + "/finished.h5");

    // A live (SWMR) file, copied while its writer is still open, and the final file it becomes.
    const std::string live = dir("fuzz_runlog") + "/writer.h5";
    RunLogWriter w = RunLogWriter::create(live, {{"steps", 3}}, {"loss", "lr"});
    w.append("loss", 0, 2.0);
    w.append("lr", 0, 0.1);
    w.append("loss", 1, 1.5);
    w.flush();
    fs::copy_file(live, dir("fuzz_runlog") + "/live.h5", fs::copy_options::overwrite_existing);
    w.setEval("acc", torch::tensor({0.5f}));
    w.stop("stopped at step 1");
}

void episode() {
    const int T = 4, A = 3;
    rl::Episode e;
    e.env = "seed";
    e.seed = 1;
    e.maxEpisodeSteps = 100;
    e.actionNames = {"NOOP", "LEFT", "RIGHT"};
    e.channelNames = {"a", "b"};
    e.terminal = true;
    e.frames = torch::arange(T * 6 * 5 * 3, torch::kInt64).remainder(256).to(torch::kUInt8).reshape({T, 6, 5, 3});
    e.observations = torch::linspace(0, 1, T * 2 * 2 * 2).reshape({T, 2, 2, 2});
    e.actions = torch::tensor({0, 1, 2, 1}, torch::kInt64);
    e.rewards = torch::tensor({0.f, 1.f, 0.f, 2.f});
    e.episodeReturn = 3;
    e.lives = torch::tensor({3, 3, 2, 2}, torch::kInt32);
    e.hasModel = true;
    e.model.family = "efficientzero";
    e.model.checkpoint = "model.h5";
    e.model.config = "{}";
    e.model.simulations = 4;
    e.model.rootValues = torch::linspace(0, 1, T);
    e.model.visitCounts = torch::ones({T, A}, torch::kInt32);
    e.model.value = torch::linspace(1, 0, T);
    e.model.valuePrefix = torch::zeros({T});
    e.model.policy = torch::full({T, A}, 1.f / A);
    e.model.childrenQ = torch::zeros({T, A});
    e.model.childrenPrior = torch::full({T, A}, 1.f / A);
    rl::writeEpisode(dir("fuzz_episode") + "/episode.h5", e);

    rl::Episode g;   // grey frames, no model, no observations, cut (not terminal)
    g.env = "grey";
    g.actionNames = {"A", "B"};
    g.frames = torch::zeros({2, 4, 4, 1}, torch::kUInt8);
    g.actions = torch::tensor({1, 0}, torch::kInt64);
    g.rewards = torch::tensor({0.5f, -1.f});
    g.episodeReturn = -0.5;
    rl::writeEpisode(dir("fuzz_episode") + "/grey.h5", g);
}

// An offline dataset (scripted demon, epsilon 0 and 1) and an EfficientZero run's state.h5.
void rlDatasets() {
    xtra::DatasetSpec spec;
    spec.env = "demon";
    spec.epsilons = {0.0, 1.0};
    spec.steps = 40;
    spec.numEnvs = 2;
    spec.envOptions.maxEpisodeSteps = 15;
    xtra::writeDataset(dir("fuzz_rl_dataset") + "/demon.h5", xtra::generateDataset(spec));
    efficientzero::TrainConfig c;
    c.env = "breakout";
    c.steps = 2;
    c.numEnvs = 2;
    c.simulations = 2;
    c.batchSize = 4;
    c.minReplay = 20;
    c.maxEpisodeSteps = 12;
    c.network = nlohmann::json::parse(R"({"channels": 4, "lstm_hidden": 8, "proj_hidden": 16, "proj_out": 16,
        "pred_hidden": 8, "reduced_channels_reward": 1, "reduced_channels_value": 1, "reduced_channels_policy": 1,
        "support_size": 10, "reward_hidden": [4], "value_hidden": [4], "policy_hidden": [4]})");
    const std::string run = (root / "ez_run").string();
    efficientzero::trainAgent(c, run);
    fs::copy_file(run + "/state.h5", dir("fuzz_rl_dataset") + "/state.h5", fs::copy_options::overwrite_existing);
    fs::remove_all(run);
}

void images() {
    const std::string d = dir("fuzz_image");
    const cv::Mat rgb = pattern(6, 5);
    saveImagePNG(d + "/rgb.png", rgb);
    cv::Mat bgr;
    cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
    cv::imwrite(d + "/rgb.jpg", bgr);
    cv::imwrite(d + "/rgb.bmp", bgr);
    cv::imwrite(d + "/rgb.ppm", bgr);
    cv::imwrite(d + "/rgb.tiff", bgr);
    cv::imwrite(d + "/rgb.webp", bgr);
    cv::imwrite(d + "/rgb.ras", bgr);
    cv::Mat grey16(4, 3, CV_16UC1, cv::Scalar(40000));
    cv::imwrite(d + "/grey16.png", grey16);
    cv::Mat rgba(4, 4, CV_8UC4, cv::Scalar(10, 20, 30, 128));
    cv::imwrite(d + "/rgba.png", rgba);
    cv::Mat f(3, 3, CV_32FC3, cv::Scalar(0.5, 0.25, 1.0));
    cv::imwrite(d + "/float.tiff", f);
}

void video() {
    const std::string path = dir("fuzz_video") + "/mjpeg.avi";
    cv::VideoWriter w(path, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 10, cv::Size(16, 12));
    if (!w.isOpened()) throw Error(path + ": cannot write a video");
    for (int i = 0; i < 3; ++i) w.write(pattern(12, 16) * (i + 1));
}

void idx() {
    const std::string d = dir("fuzz_idx");
    data::writeIdx(d + "/images-idx3-ubyte", data::IdxArray{{2, 3, 3}, std::vector<uint8_t>(18, 9)});
    data::writeIdx(d + "/labels-idx1-ubyte", data::IdxArray{{3}, {1, 2, 3}});
    // The same images gzipped, as Debian ships Fashion-MNIST.
    std::ifstream in(d + "/images-idx3-ubyte", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    gzFile gz = gzopen((d + "/images-idx3-ubyte.gz").c_str(), "wb9");
    gzwrite(gz, bytes.data(), unsigned(bytes.size()));
    gzclose(gz);
}

void configs() {
    const std::string t = "fuzz_config_json";
    text(t, "0-letr.json", std::string(1, '\0') + fuzz::smallLetr().toJsonString());
    text(t, "1-coat.json", std::string(1, '\1') + fuzz::smallCoat().toJsonString());
    text(t, "2-constellation.json", std::string(1, '\2') + fuzz::smallConstellation().toJsonString());
    text(t, "3-efficientzero.json", std::string(1, '\3') + fuzz::smallEfficientZero().toJson().dump());
    text(t, "4-letr-train.json", std::string(1, '\4') + letr::LetrTrainConfig{}.toJson().dump());
    text(t, "5-coat-train.json", std::string(1, '\5') + coat::CoatTrainConfig{}.toJson().dump());
    text(t, "6-constellation-train.json", std::string(1, '\6') + constellation::ConstellationTrainConfig{}.toJson().dump());
    text(t, "7-efficientzero-train.json", std::string(1, '\7') + efficientzero::TrainConfig{}.toJson().dump());
    text(t, "1-coat-variant.json", std::string(1, '\1') + R"({"variant": "coat_tiny", "num_classes": 2, "class_names": ["a", "b"]})");
}

void specs() {
    const std::string t = "fuzz_data_spec";
    const std::vector<std::string> line = {"procedural:5", "procedural:3:7:40x32", "ds.json", "lines", "img.png"};
    const std::vector<std::string> cls = {"cls", "fashion-mnist:fm", "mini", "fashion-mnist:"};
    const std::vector<std::string> few = {"procedural", "procedural:3", "mini", "fashion-mnist:fm", "cls"};
    int n = 0;
    for (const auto& s : line) text(t, "line" + std::to_string(n++), std::string(1, '\0') + s);
    for (const auto& s : cls) text(t, "class" + std::to_string(n++), std::string(1, '\1') + s);
    for (const auto& s : few) text(t, "fewshot" + std::to_string(n++), std::string(1, '\2') + s);

    const std::string w = "fuzz_wireframe";
    text(w, "one.json", R"([{"filename": "img.png", "lines": [[1, 1, 10, 12], [0, 15, 15, 0]], "width": 16, "height": 16}])");
    text(w, "no-size.json", R"([{"filename": "img.png", "lines": [[0.5, 2.5, 3, 4]]}, {"filename": "img.png", "lines": []}])");
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: glimpse_fuzz_seeds OUT_DIR\n");
        return 2;
    }
    root = argv[1];
    try {
        checkpointsAndTraces();
        runLogs();
        episode();
        rlDatasets();
        images();
        video();
        idx();
        configs();
        specs();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "glimpse_fuzz_seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
