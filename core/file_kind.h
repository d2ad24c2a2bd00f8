#pragma once
// What a Glimpse HDF5 file is, read from its header without loading it: the `kind` root
// attribute ("glimpse.checkpoint", "glimpse.trace", "glimpse.runlog", "glimpse.episode"), its
// format version and, for checkpoints and traces, the model family in /meta. Openers (the GUI's
// File > Open, drag and drop, the command line) dispatch on it.
#include <cstdint>
#include <string>

namespace glimpse {

struct FileKind {
    std::string kind;      // e.g. "glimpse.trace"
    int64_t formatVersion = 0;
    std::string family;    // "letr", "coat", ... ("" when the kind has none)
};

// Throws glimpse::Error naming the file when it cannot be opened as HDF5 or is not a Glimpse
// file (no 'kind' attribute).
FileKind identifyGlimpseFile(const std::string& path);

} // namespace glimpse
