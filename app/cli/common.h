#pragma once
// What the headless commands share: Ctrl-C handling for trainings, the one-line training
// progress display, and metric lookup.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dist/dist.h"
#include "core/train/control.h"

namespace glimpse::cli {

class Args;

// Distributed training (docs/distributed.md): the flags every `glimpse train` command takes
// (--world-size, --rank, --local-rank, --master-addr, --master-port, --dist-timeout), their
// usage text, and the settings from them over the launcher's environment (MASTER_ADDR, ...).
const std::vector<std::string>& distFlags();
extern const char* kDistUsage;
dist::Settings distSettings(const Args& a);

// While alive, SIGINT (Ctrl-C) asks `control` to stop (the trainer then writes its checkpoint
// and returns); the previous handler is restored on destruction, also when an exception leaves.
class StopOnInterrupt {
public:
    explicit StopOnInterrupt(train::Control& control);
    ~StopOnInterrupt();
    StopOnInterrupt(const StopOnInterrupt&) = delete;
    StopOnInterrupt& operator=(const StopOnInterrupt&) = delete;

private:
    void (*previous_)(int) = nullptr;
    train::Control* previousControl_ = nullptr;
};

// The images of an --image argument: one image file, every image file of a folder (sorted), or
// the paths listed in a .txt file (one per line, relative to the list; # comments). `many` is
// true for a folder or a list. Errors name the argument (an empty folder or list, say).
std::vector<std::string> collectImages(const std::string& spec, bool& many);
// Creates `dir` (and its parents) unless it exists; an Error naming it when that fails.
void createOutputFolder(const std::string& dir);

// The latest value of metric `key` in `p`, or `def` when the trainer has not reported it.
double latestMetric(const train::Progress& p, const std::string& key, double def = 0.0);

// A training's progress on stderr: "[#####.....] 120/400 coarse  <metrics>  00:42<02:10".
// On a terminal the line is redrawn in place; otherwise a line is printed every `every` steps
// and at the end. `maxSteps` >= 0 asks `control` to stop once that many steps are done
// (--steps N).
class TrainingProgress {
public:
    using Metrics = std::function<std::string(const train::Progress&)>;
    TrainingProgress(train::Control& control, Metrics metrics, int64_t maxSteps = -1, int64_t every = 25,
                     std::string label = "");
    ~TrainingProgress();   // ends the terminal line
    void operator()(const train::Progress& p);
    // A ProgressFn for the trainers (refers to this object).
    train::ProgressFn fn();

private:
    train::Control& control_;
    Metrics metrics_;
    int64_t maxSteps_;
    int64_t every_;
    std::string label_;
    bool tty_;
    bool drawn_ = false;
    int64_t lastPrinted_ = -1;
    std::string lastPhase_;
};

// Progress through a count of items on stderr: "<prefix><done> / <total><unit>". On a terminal
// the line is redrawn in place at every call; otherwise (a log file, a pipe) a line is printed
// each time another tenth of the total is done and at the end, so a log gets about ten lines
// instead of one run-on line of carriage returns. Pass fn() as the callback.
class CountProgress {
public:
    CountProgress(std::string prefix, std::string unit);
    ~CountProgress();   // ends the terminal line
    void operator()(int64_t done, int64_t total);
    std::function<void(int64_t, int64_t)> fn();

private:
    std::string prefix_;
    std::string unit_;
    bool tty_;
    bool drawn_ = false;
    int64_t lastTenth_ = -1;
};

} // namespace glimpse::cli
