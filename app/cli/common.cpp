#include "app/cli/common.h"

#include <algorithm>
#include <filesystem>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <unistd.h>

#include "app/cli/cli.h"
#include "core/error.h"
#include "core/io/image.h"
#include "core/util/timing.h"

namespace glimpse::cli {

namespace {
train::Control* gControl = nullptr;
extern "C" void onInterrupt(int) {
    if (gControl) gControl->requestStop();
}
} // namespace

StopOnInterrupt::StopOnInterrupt(train::Control& control) : previousControl_(gControl) {
    gControl = &control;
    previous_ = std::signal(SIGINT, onInterrupt);
}

StopOnInterrupt::~StopOnInterrupt() {
    std::signal(SIGINT, previous_ == SIG_ERR ? SIG_DFL : previous_);
    gControl = previousControl_;
}

const std::vector<std::string>& distFlags() {
    static const std::vector<std::string> flags{"--world-size", "--rank",        "--local-rank",
                                                "--master-addr", "--master-port", "--dist-timeout"};
    return flags;
}

const char* kDistUsage =
    "Distributed (data-parallel, c10d Gloo): start one process per rank with the launcher's\n"
    "environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK, as torchrun sets them)\n"
    "or the flags --master-addr A --master-port P --world-size W --rank R [--local-rank L]\n"
    "[--dist-timeout SECONDS] (default 120). Rank 0 writes the run log and checkpoints.\n";

dist::Settings distSettings(const Args& a) {
    std::map<std::string, std::string> overrides;
    for (const std::string& f : distFlags())
        if (auto v = a.get(f)) overrides[f.substr(2)] = *v;
    return dist::settingsFromEnvironment(overrides);
}

double latestMetric(const train::Progress& p, const std::string& key, double def) {
    auto it = p.latest.find(key);
    return it == p.latest.end() ? def : it->second;
}

TrainingProgress::TrainingProgress(train::Control& control, Metrics metrics, int64_t maxSteps, int64_t every,
                                   std::string label)
    : control_(control), metrics_(std::move(metrics)), maxSteps_(maxSteps), every_(std::max<int64_t>(1, every)),
      label_(std::move(label)), tty_(isatty(fileno(stderr)) != 0) {
    // --steps 0: a checkpoint of the starting point (progress arrives only after a step).
    if (maxSteps_ == 0) control_.requestStop();
}

TrainingProgress::~TrainingProgress() {
    if (tty_ && drawn_) std::cerr << "\n" << std::flush;
}

void TrainingProgress::operator()(const train::Progress& p) {
    if (maxSteps_ >= 0 && p.step >= maxSteps_) control_.requestStop();
    if (p.phase == "stopped") return;
    if (p.phase != lastPhase_ || p.step < lastPrinted_) {   // a new phase counts its own steps
        lastPhase_ = p.phase;
        lastPrinted_ = -every_;
    }
    const bool show = tty_ || p.step == p.totalSteps || p.step - lastPrinted_ >= every_;
    if (!show || (!tty_ && p.step == lastPrinted_)) return;
    lastPrinted_ = p.step;
    const int width = 30;
    const double frac = p.totalSteps > 0 ? double(p.step) / double(p.totalSteps) : 1.0;
    const int fill = std::clamp(int(frac * width + 0.5), 0, width);
    std::string line = (tty_ ? "\r" : "") + label_ + "[" + std::string(size_t(fill), '#') +
                       std::string(size_t(width - fill), '.') + "] " + std::to_string(p.step) + "/" +
                       std::to_string(p.totalSteps) + " ";
    std::string phase = p.phase;
    phase.resize(std::max<size_t>(phase.size(), 8), ' ');
    line += phase + " " + (metrics_ ? metrics_(p) : std::string()) + "  " + clockText(p.elapsed) + "<" +
            clockText(p.eta);
    std::cerr << line << (tty_ ? "   " : "\n") << std::flush;
    drawn_ = true;
}

train::ProgressFn TrainingProgress::fn() {
    return [this](const train::Progress& p) { (*this)(p); };
}

CountProgress::CountProgress(std::string prefix, std::string unit)
    : prefix_(std::move(prefix)), unit_(std::move(unit)), tty_(isatty(fileno(stderr)) != 0) {}

CountProgress::~CountProgress() {
    if (tty_ && drawn_) std::cerr << "\n" << std::flush;
}

void CountProgress::operator()(int64_t done, int64_t total) {
    const std::string text = prefix_ + std::to_string(done) + " / " + std::to_string(total) + unit_;
    if (tty_) {
        std::cerr << "\r" << text << std::flush;
        drawn_ = true;
        return;
    }
    const int64_t tenth = total > 0 ? done * 10 / total : 10;
    if (tenth == lastTenth_ && done != total) return;
    lastTenth_ = tenth;
    std::cerr << text << "\n" << std::flush;
}

std::function<void(int64_t, int64_t)> CountProgress::fn() {
    return [this](int64_t done, int64_t total) { (*this)(done, total); };
}

namespace fs = std::filesystem;

std::vector<std::string> collectImages(const std::string& spec, bool& many) {
    const fs::path p(spec);
    many = fs::is_directory(p) || p.extension() == ".txt";
    if (!many) return {spec};
    return listImageFiles(spec);
}

void createOutputFolder(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (!fs::is_directory(dir))
        throw Error(dir + ": cannot create the output folder" + (ec ? " (" + ec.message() + ")" : ""));
}

} // namespace glimpse::cli
