#pragma once
// Running a reader of an untrusted file in a child process (POSIX fork), for the command line.
//
// libhdf5 1.10 crashes or loops on some damaged files, below any call Glimpse could check first
// (docs/fuzzing.md, finding 8). `glimpse info`, `glimpse check file` and `glimpse data verify`
// therefore read each file in a forked child: what it writes to std::cout and std::cerr is passed
// back and written to the parent's std::cout and std::cerr when it ends (so a caller that
// captures those streams sees it), and a crash or a hang of the child becomes a message naming
// the file (its output is then lost). Only for
// single-threaded callers (the CLI before any model runs): after fork() the child has one thread.
#include <cstddef>
#include <functional>
#include <string>

namespace glimpse {

struct IsolatedResult {
    int exitCode = -1;   // the body's return value when it returned
    int signal = 0;      // the signal that ended the child (SIGSEGV, SIGABRT, SIGKILL on timeout)
    bool timedOut = false;
    double limitSeconds = 0;   // the time limit it ran under
    size_t memoryLimitBytes = 0;   // the address space it could add (0: no limit)
    bool ok() const { return signal == 0 && !timedOut && exitCode == 0; }
    // "" when the body returned; otherwise "the HDF5 library crashed (SIGSEGV) reading FILE ..."
    // or "did not finish reading FILE within 60 s ..." about `what`, e.g. "reading FILE".
    std::string failure(const std::string& what) const;
};

// Runs `body` in a forked child and waits up to `timeoutSeconds` (then kills it with SIGKILL).
// With `memoryLimitBytes` > 0 the child may grow its address space by at most that much
// (RLIMIT_AS over what it had at the fork): a damaged file that declares a string of 5 GB makes
// the allocation fail, and the body's error report, instead of taking the machine's memory.
// The body's exceptions are its own business: it must catch them and return an exit code.
// Without fork (or if fork fails), runs `body` in this process, without the memory limit.
IsolatedResult runIsolated(const std::function<int()>& body, double timeoutSeconds, size_t memoryLimitBytes = 0);

} // namespace glimpse
