#include "core/util/isolate.h"

#include <poll.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace glimpse {

namespace {

std::string signalName(int sig) {
    const char* abbrev = sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Waits for `pid` up to `seconds`: true when it ended (status in *status).
bool waitFor(pid_t pid, double seconds, int* status) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    for (;;) {
        const pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) {
            if (fd >= 0) close(fd);
            return true;
        }
        if (r < 0 && errno != EINTR) {
            if (fd >= 0) close(fd);
            return true;   // not our child any more: nothing to wait for
        }
        const double left =
            std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            if (fd >= 0) close(fd);
            return false;
        }
        // pidfd (Linux >= 5.3) becomes readable when the child exits; without it, poll in 10 ms steps.
        const int ms = static_cast<int>(std::ceil(std::min(left, fd >= 0 ? left : 0.01) * 1000));
        if (fd >= 0) {
            pollfd p{fd, POLLIN, 0};
            poll(&p, 1, ms);
        } else {
            poll(nullptr, 0, ms);
        }
    }
}

} // namespace

std::string IsolatedResult::failure(const std::string& what) const {
    if (timedOut) return "did not finish " + what + " (the HDF5 library is stuck on it): the file is damaged";
    if (signal != 0)
        return "the HDF5 library crashed (" + signalName(signal) + ") " + what + ": the file is damaged";
    return "";
}

IsolatedResult runIsolated(const std::function<int()>& body, double timeoutSeconds) {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    IsolatedResult res;
    const pid_t pid = fork();
    if (pid < 0) {
        res.exitCode = body();
        return res;
    }
    if (pid == 0) {
        // A child whose parent is killed (e.g. the GUI's time limit on `glimpse check file`)
        // goes with it instead of spinning on for minutes.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1) _exit(1);
        // The child: run, flush what it printed, leave without running the parent's atexit
        // handlers or static destructors a second time.
        int rc = 1;
        try {
            rc = body();
        } catch (...) {
            rc = 1;
        }
        std::cout.flush();
        std::cerr.flush();
        std::fflush(nullptr);
        _exit(rc & 0xff);
    }
    int status = 0;
    if (!waitFor(pid, timeoutSeconds, &status)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        res.timedOut = true;
        res.signal = SIGKILL;
        return res;
    }
    if (WIFEXITED(status)) res.exitCode = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) res.signal = WTERMSIG(status);
    return res;
}

} // namespace glimpse
