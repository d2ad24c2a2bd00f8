#pragma once
// Small helpers shared by the benchmarks and progress displays of the CLI and the GUI.
#include <chrono>
#include <string>
#include <vector>

namespace glimpse {

// The median of `v` (0 when empty); takes a copy because it sorts.
double median(std::vector<double> v);
// The q-quantile (0..1) of `v`, linearly interpolated between ranks; 0 when empty.
double percentile(std::vector<double> v, double q);
// CPU seconds of this process so far, every thread, user and system: on a shared machine the
// figure to compare (wall time also counts the time other processes held the cores).
double processCpuSeconds();
// Milliseconds since `t0`.
double msSince(std::chrono::steady_clock::time_point t0);
// "mm:ss" below an hour, "h:mm:ss" above, "--:--" for negative (unknown) durations.
std::string clockText(double seconds);
// Keeps freed heap memory in the process instead of returning it to the OS: a model pass
// allocates and frees buffers of tens of MB per layer, and handing them back makes every pass
// fault them in again (page faults are costly, notably on virtual machines).
void keepFreedMemory();
// Peak resident memory of this process in KiB (VmHWM), -1 where /proc is not available.
long long peakRssKiB();
// Current resident memory of this process in KiB (VmRSS), -1 where /proc is not available.
long long currentRssKiB();

} // namespace glimpse
