#pragma once
// Atomic file replacement: write a temp file beside the target, fsync it, rename() it over the
// target. Readers see either the old file or the complete new one, never a partial write.
#include <cstddef>
#include <functional>
#include <string>

namespace glimpse {

// Creates an empty `path + ".tmp-<pid>-<n>"` (so a missing directory or a permission problem
// is reported with its errno text), calls write(tmpPath), which may truncate and rewrite it,
// then fsyncs, renames over `path` and fsyncs the directory. If write() throws or any step
// fails, the temp file is removed, `path` is left as it was, and the exception propagates
// (failures of this function itself are glimpse::Error naming `path`).
void writeFileAtomically(const std::string& path,
                         const std::function<void(const std::string& tmpPath)>& write);

// Convenience: the whole content at once.
void writeBytesAtomically(const std::string& path, const void* data, size_t size);

} // namespace glimpse
