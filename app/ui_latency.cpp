#include "app/ui_latency.h"

#include <QTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

namespace glimpse::app {

namespace {

double threadCpuMs() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double percentile(const std::vector<float>& sorted, double q) {
    if (sorted.empty()) return 0;
    const size_t i = size_t(std::ceil(q * double(sorted.size()))) - 1;
    return sorted[std::min(i, sorted.size() - 1)];
}

} // namespace

const std::vector<double>& LatencyStats::histogramEdges() {
    static const std::vector<double> edges = {1, 2, 5, 10, 20, 50, 100, 200};
    return edges;
}

std::string LatencyStats::histogramText() const {
    const auto& e = histogramEdges();
    std::string out;
    char buf[64];
    for (size_t i = 0; i < histogram.size(); ++i) {
        if (i == 0) std::snprintf(buf, sizeof buf, "<%g:%d", e[0], histogram[i]);
        else if (i < e.size()) std::snprintf(buf, sizeof buf, " %g-%g:%d", e[i - 1], e[i], histogram[i]);
        else std::snprintf(buf, sizeof buf, " >%g:%d", e.back(), histogram[i]);
        out += buf;
    }
    return out;
}

LatencyStats summarize(std::vector<float> samples, double intervalMs, double seconds) {
    LatencyStats s;
    s.intervalMs = intervalMs;
    s.seconds = seconds;
    s.ticks = int(samples.size());
    const auto& edges = LatencyStats::histogramEdges();
    s.histogram.assign(edges.size() + 1, 0);
    if (samples.empty()) return s;
    double sum = 0;
    for (float v : samples) {
        sum += v;
        const size_t b = size_t(std::upper_bound(edges.begin(), edges.end(), double(v)) - edges.begin());
        ++s.histogram[b];
    }
    std::sort(samples.begin(), samples.end());
    s.meanMs = sum / double(samples.size());
    s.p50Ms = percentile(samples, 0.50);
    s.p99Ms = percentile(samples, 0.99);
    s.maxMs = samples.back();
    return s;
}

UiLatencyProbe::UiLatencyProbe(QObject* parent, int intervalMs)
    : QObject(parent), interval_(std::max(1, intervalMs)) {
    timer_ = new QTimer(this);
    timer_->setTimerType(Qt::PreciseTimer);
    timer_->setInterval(interval_);
    connect(timer_, &QTimer::timeout, this, &UiLatencyProbe::tick);
}

UiLatencyProbe::~UiLatencyProbe() {
    if (schedFd_ >= 0) ::close(schedFd_);
}

double UiLatencyProbe::queueMs() const {
    if (schedFd_ < 0) return 0;
    char buf[128];
    const ssize_t n = ::pread(schedFd_, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    unsigned long long onCpu = 0, waiting = 0;
    if (std::sscanf(buf, "%llu %llu", &onCpu, &waiting) != 2) return 0;
    return double(waiting) * 1e-6;
}

void UiLatencyProbe::start() {
    late_.clear();
    cpu_.clear();
    queue_.clear();
    at_.clear();
    if (schedFd_ < 0) schedFd_ = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);   // this (the UI) thread's
    clock_.start();
    lastNs_ = 0;
    lastCpuMs_ = threadCpuMs();
    lastQueueMs_ = queueMs();
    timer_->start();
}

void UiLatencyProbe::stop() { timer_->stop(); }
bool UiLatencyProbe::isRunning() const { return timer_->isActive(); }

void UiLatencyProbe::tick() {
    const qint64 now = clock_.nsecsElapsed();
    const double cpu = threadCpuMs();
    const double gapMs = double(now - lastNs_) * 1e-6;
    late_.push_back(float(std::max(0.0, gapMs - interval_)));
    cpu_.push_back(float(cpu - lastCpuMs_));
    const double queue = queueMs();
    queue_.push_back(float(queue - lastQueueMs_));
    at_.push_back(now);
    lastNs_ = now;
    lastCpuMs_ = cpu;
    lastQueueMs_ = queue;
}

LatencyStats UiLatencyProbe::stats(int first, int last) const {
    const int n = ticks();
    if (last < 0 || last > n) last = n;
    first = std::clamp(first, 0, last);
    std::vector<float> part(late_.begin() + first, late_.begin() + last);
    double seconds = 0;
    if (last > first) seconds = double(at_[size_t(last - 1)] - (first > 0 ? at_[size_t(first - 1)] : 0)) * 1e-9;
    LatencyStats s = summarize(std::move(part), interval_, seconds);
    if (last > first) {   // the CPU time of the worst gap
        const auto worst = std::max_element(late_.begin() + first, late_.begin() + last);
        s.maxCpuMs = cpu_[size_t(worst - late_.begin())];
        s.maxAtSeconds = double(at_[size_t(worst - late_.begin())]) * 1e-9;
        s.maxQueueMs = queue_[size_t(worst - late_.begin())];
        s.haveQueue = schedFd_ >= 0;
        std::vector<float> own;
        for (int i = first; i < last; ++i) own.push_back(std::max(0.f, late_[size_t(i)] - queue_[size_t(i)]));
        const LatencyStats o = summarize(std::move(own), interval_, seconds);
        s.ownP99Ms = o.p99Ms;
        s.ownMaxMs = o.maxMs;
    }
    return s;
}

} // namespace glimpse::app
