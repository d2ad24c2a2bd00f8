#pragma once
// How a caller (the CLI's progress bar, a GUI job) watches and steers a training run. Shared by
// every trainer (LETR, CoaT, EfficientZero/XTRA). Trainers call control.checkpoint() between
// steps: it blocks while paused and returns false once a stop was requested, after which the
// trainer writes a final checkpoint and returns.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace glimpse::train {

struct Progress {
    int64_t step = 0;            // optimizer steps done (over all phases)
    int64_t totalSteps = 0;
    std::string phase;           // e.g. "coarse", "fine", "focal", "selfplay"
    double elapsed = 0;          // seconds since this process started the run
    double eta = -1;             // seconds left, -1 while unknown
    std::map<std::string, double> latest;   // the latest value of each metric
};

using ProgressFn = std::function<void(const Progress&)>;

class Control {
public:
    void requestStop() {
        stop_ = true;
        cv_.notify_all();
    }
    bool stopRequested() const { return stop_; }
    void setPaused(bool on) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            paused_ = on;
        }
        cv_.notify_all();
    }
    bool paused() const { return paused_; }
    // Blocks while paused; returns false when the run should stop.
    bool checkpoint() {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return !paused_ || stop_; });
        return !stop_;
    }

private:
    std::atomic<bool> stop_{false};
    std::atomic<bool> paused_{false};
    std::mutex mutex_;
    std::condition_variable cv_;
};

} // namespace glimpse::train
