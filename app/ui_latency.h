#pragma once
// Event-loop latency probe (issue 22, docs/ui-latency.md): how long the UI thread fails to get
// back to its event loop while the app works.
//
// Method: a precise QTimer on the UI thread asks to run every `intervalMs` (default 5 ms). Each
// tick records its lateness: the time since the previous tick was handled, minus the interval
// (0 when on time). While the UI thread is stuck in one piece of work for B ms, the tick due
// meanwhile runs only after it, so some tick is late by at least B - interval and at most B:
// the maximum lateness is the longest stall to within one interval (a stall of 50 + interval ms
// always shows as more than 50 ms). An idle event loop's own jitter is what stats() of an idle
// period reports (about 0.1-1 ms). Each tick also records the UI thread's CPU time since the
// previous tick (CLOCK_THREAD_CPUTIME_ID): a late tick with little CPU time means the thread
// waited (a lock, I/O, or a machine with every core busy), one with CPU time near the lateness
// means the UI thread itself computed. Where Linux keeps scheduler statistics
// (/proc/thread-self/schedstat) each tick also records how long the UI thread waited for a CPU
// while runnable in that gap (the run queue: other threads and processes had the cores);
// `own` lateness is the lateness minus that wait: the stall the UI thread caused itself (its
// work, or a lock or I/O it waited on), which is what the 50 ms goal is about. On a machine
// with every core busy the plain lateness can be far above it.
#include <QElapsedTimer>
#include <QObject>
#include <QString>

#include <string>
#include <vector>

class QTimer;

namespace glimpse::app {

struct LatencyStats {
    int ticks = 0;
    double intervalMs = 0;
    double seconds = 0;              // wall time covered by these ticks
    double meanMs = 0, p50Ms = 0, p99Ms = 0, maxMs = 0;   // lateness of a tick
    double maxCpuMs = 0;             // UI-thread CPU time in the gap before the latest tick
    double maxAtSeconds = 0;         // when the latest tick ran (seconds since start())
    double maxQueueMs = 0;           // time the UI thread waited for a CPU in that gap
    bool haveQueue = false;          // run-queue times are known (else own = lateness)
    double ownP99Ms = 0, ownMaxMs = 0;   // lateness minus run-queue wait, per tick
    std::vector<int> histogram;      // ticks per lateness bucket (histogramEdges())
    // Upper edges (ms) of the histogram buckets; the last bucket is everything above.
    static const std::vector<double>& histogramEdges();
    std::string histogramText() const;   // "<1:812 1-2:30 ... >200:0"
};

class UiLatencyProbe : public QObject {
    Q_OBJECT
public:
    explicit UiLatencyProbe(QObject* parent = nullptr, int intervalMs = 5);
    ~UiLatencyProbe() override;

    void start();                    // forgets earlier ticks
    void stop();
    bool isRunning() const;
    int intervalMs() const { return interval_; }
    int ticks() const { return int(late_.size()); }
    // Statistics of ticks [first, last) (last < 0: up to now).
    LatencyStats stats(int first = 0, int last = -1) const;
    // Lateness (ms) of each tick so far.
    const std::vector<float>& lateness() const { return late_; }

private:
    void tick();

    QTimer* timer_ = nullptr;
    int interval_;
    QElapsedTimer clock_;
    qint64 lastNs_ = 0;
    double lastCpuMs_ = 0;
    std::vector<float> late_, cpu_, queue_;
    int schedFd_ = -1;               // /proc/thread-self/schedstat of the UI thread
    double lastQueueMs_ = 0;
    double queueMs() const;          // run-queue wait so far (0 without schedstat)
    std::vector<qint64> at_;         // ns since start() of each tick
};

// Statistics of plain samples (ms), e.g. seek times; ticks = count.
LatencyStats summarize(std::vector<float> samples, double intervalMs, double seconds);

} // namespace glimpse::app
