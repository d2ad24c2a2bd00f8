#pragma once
// Shared helpers of the fuzz targets (docs/fuzzing.md).
//
// A target feeds one input to a real reader of user files. The correct outcome for a bad input
// is a glimpse::Error (the "clear error" every reader documents); everything else is a finding:
// a crash or sanitizer report, an abort, a hang (libFuzzer -timeout), an exception of another
// type (reported here and turned into an abort, so libFuzzer saves the input), or an HDF5 object
// left open after the reader returned or threw (a handle leak: the file stays locked/open).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <typeinfo>
#include <unistd.h>

#include <hdf5.h>

#include "core/error.h"
#include "core/h5/h5.h"

namespace glimpse::fuzz {

// SWMR reads of a corrupt block: 2 tries instead of 24 (h5::setSwmrReadAttempts). The retry
// path still runs; the other 22 tries would re-read the same bytes and sleep.
inline const bool kFewerSwmrRetries = (h5::setSwmrReadAttempts(2), true);

// A per-process file name in /dev/shm (RAM), so parallel fuzzers never share a file.
inline std::string tempPath(const std::string& name) {
    return "/dev/shm/glimpse-fuzz-" + std::to_string(getpid()) + "-" + name;
}

inline void writeFile(const std::string& path, const uint8_t* data, size_t size) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    if (!out) {
        std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
        std::abort();
    }
}

[[noreturn]] inline void finding(const char* what, const std::string& detail) {
    std::fprintf(stderr, "\n==FUZZ FINDING== %s: %s\n", what, detail.c_str());
    std::fflush(stderr);
    std::abort();
}

// Number of HDF5 objects (files, groups, datasets, attributes, types) still open.
inline ssize_t openH5Objects() {
    return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
}

// Runs `f`; a glimpse::Error is the expected outcome for a bad input, any other exception is a
// finding. With `checkHandles`, the HDF5 objects open before and after must be the same.
template <class F>
void expectClearError(F&& f, bool checkHandles = true) {
    const ssize_t before = checkHandles ? openH5Objects() : 0;
    try {
        f();
    } catch (const glimpse::Error&) {
        // the documented outcome
    } catch (const std::exception& e) {
        finding("exception other than glimpse::Error", std::string(typeid(e).name()) + ": " + e.what());
    } catch (...) {
        finding("non-standard exception", "");
    }
    if (checkHandles) {
        const ssize_t after = openH5Objects();
        if (after != before)
            finding("HDF5 objects left open", std::to_string(before) + " before, " + std::to_string(after) + " after");
    }
}

} // namespace glimpse::fuzz
