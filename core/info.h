#pragma once
// `glimpse info FILE.h5`: a human-readable description of any HDF5 file.
#include <string>

namespace glimpse {

// Kind and format version, the family/config/status summary of Glimpse files, then the tree of
// groups and datasets with dtype, shape and size, and the totals. A foreign HDF5 file (no
// 'kind' attribute) is listed too, flagged "not a Glimpse file". Throws glimpse::Error naming
// the file when it is missing, not HDF5, truncated or corrupt.
// `tensors` false (`glimpse info` without --tensors): a Glimpse file's tree is left out (its
// totals and how to list it stay); a foreign file's tree is always listed (nothing else to say).
std::string describeH5(const std::string& path, bool tensors = true);

// A checkpoint's (or training state's) summary: family, parameters, tensors, size on disk,
// architecture (the config's architecture keys), classes, training (the run log beside it:
// status, steps, data, metrics) and the command that opens it. Throws glimpse::Error naming the
// file when it cannot be read.
std::string describeCheckpoint(const std::string& path);

// For a file that is not HDF5: what it is (an image with its size, a video, a PyTorch file, a
// JSON config) and the command that opens it; *recognized tells whether it was one of those.
// "" when the file is HDF5 or does not exist (describeH5 reports those).
std::string describeNotHdf5(const std::string& path, bool* recognized);

// Reads the value of every string attribute of every group and dataset (the root's included),
// as an opener of the file may: a damaged file whose string declares gigabytes makes libhdf5
// allocate them (fuzz finding 15), so `glimpse check file` runs this under a memory limit before
// the GUI opens the file. Throws glimpse::Error naming the file, the object and the attribute.
void readEveryStringAttribute(const std::string& path);

// The summary of an episode file (glimpse.episode, any version this Glimpse reads): game,
// steps, return, terminal or truncated, frame shape, life losses, which model outputs are
// recorded, format version. Throws glimpse::Error naming the file and the problem.
std::string describeEpisode(const std::string& path);

// "0 B", "512 B", "1.5 KiB", "3.2 MiB", ...
std::string humanBytes(long long bytes);

} // namespace glimpse
