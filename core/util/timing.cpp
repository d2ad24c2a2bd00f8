#include "core/util/timing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <malloc.h>
#include <time.h>

namespace glimpse {

double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const double idx = std::clamp(q, 0.0, 1.0) * double(v.size() - 1);
    const size_t lo = size_t(std::floor(idx)), hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (v[hi] - v[lo]) * (idx - double(lo));
}

double processCpuSeconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double msSince(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string clockText(double s) {
    if (s < 0) return "--:--";
    char buf[32];
    const long t = long(s + 0.5);
    if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%02ld:%02ld", t / 60, t % 60);
    return buf;
}

void keepFreedMemory() {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

namespace {
long long statusKiB(const char* key) {
    std::ifstream f("/proc/self/status");
    std::string line;
    const std::string k(key);
    while (std::getline(f, line))
        if (line.rfind(k, 0) == 0) return std::atoll(line.c_str() + k.size());
    return -1;
}
} // namespace

long long peakRssKiB() { return statusKiB("VmHWM:"); }
long long currentRssKiB() { return statusKiB("VmRSS:"); }

} // namespace glimpse
