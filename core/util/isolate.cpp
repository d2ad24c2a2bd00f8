#include "core/util/isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace glimpse {

namespace {

std::string signalName(int sig) {
    const char* abbrev = sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

void writeAll(int fd, const char* p, size_t n) {
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        n -= size_t(w);
    }
}

// The child's std::cout and std::cerr text goes back to the parent through a pipe, framed as
// [u64 size][stdout][u64 size][stderr], and the parent writes it to its own std::cout / std::cerr
// (so callers that capture those streams, e.g. tests, see it as if the body ran in-process).
void sendStreams(int fd, const std::string& out, const std::string& err) {
    for (const std::string* s : {&out, &err}) {
        const uint64_t n = s->size();
        writeAll(fd, reinterpret_cast<const char*>(&n), sizeof n);
        writeAll(fd, s->data(), s->size());
    }
}

void forwardStreams(const std::string& bytes) {
    size_t at = 0;
    for (std::ostream* os : {&std::cout, &std::cerr}) {
        uint64_t n = 0;
        if (at + sizeof n > bytes.size()) return;   // the child died before it sent everything
        std::memcpy(&n, bytes.data() + at, sizeof n);
        at += sizeof n;
        if (n > bytes.size() - at) return;
        os->write(bytes.data() + at, std::streamsize(n));
        os->flush();
        at += n;
    }
}

// Waits for `pid` up to `seconds` while reading its pipe `fd` into *bytes: true when it ended
// (status in *status).
bool waitFor(pid_t pid, int fd, double seconds, int* status, std::string* bytes) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    bool pipeOpen = true;
    auto finish = [&](bool ended) {
        if (pidfd >= 0) close(pidfd);
        return ended;
    };
    for (;;) {
        if (!pipeOpen) {
            const pid_t r = waitpid(pid, status, WNOHANG);
            if (r == pid || (r < 0 && errno != EINTR)) return finish(true);
        }
        const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) return finish(false);
        // Without a pidfd (Linux < 5.3), check on the child every 10 ms once its pipe is closed.
        const int ms = static_cast<int>(std::ceil(std::min(left, !pipeOpen && pidfd < 0 ? 0.01 : left) * 1000));
        pollfd p[2] = {{pipeOpen ? fd : -1, POLLIN, 0}, {pidfd, POLLIN, 0}};
        if (poll(p, 2, ms) < 0 && errno != EINTR) return finish(waitpid(pid, status, 0) == pid);
        if (pipeOpen && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[65536];
            const ssize_t n = read(fd, buf, sizeof buf);
            if (n > 0) bytes->append(buf, size_t(n));
            else if (n == 0 || errno != EINTR) pipeOpen = false;
        }
    }
}

// This process's address space (VmSize) in bytes, 0 when /proc is not there.
size_t addressSpaceBytes() {
    std::ifstream in("/proc/self/status");
    std::string key;
    while (in >> key) {
        if (key == "VmSize:") {
            size_t kb = 0;
            in >> kb;
            return kb * 1024;
        }
        in.ignore(1 << 16, '\n');
    }
    return 0;
}

void limitGrowth(size_t bytes) {
    const size_t now = addressSpaceBytes();
    if (bytes == 0 || now == 0) return;
    const rlimit lim{rlim_t(now + bytes), rlim_t(now + bytes)};
    setrlimit(RLIMIT_AS, &lim);
}

} // namespace

std::string IsolatedResult::failure(const std::string& what) const {
    if (timedOut) {
        std::ostringstream limit;
        limit << limitSeconds << " s";
        return "did not finish " + what + " within " + limit.str() + " (the HDF5 library is stuck on it): the file is damaged";
    }
    if (signal != 0)
        return "the HDF5 library crashed (" + signalName(signal) + ") " + what + ": the file is damaged";
    return "";
}

IsolatedResult runIsolated(const std::function<int()>& body, double timeoutSeconds, size_t memoryLimitBytes) {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    IsolatedResult res;
    res.limitSeconds = timeoutSeconds;
    res.memoryLimitBytes = memoryLimitBytes;
    int fds[2];
    const pid_t pid = pipe2(fds, O_CLOEXEC) == 0 ? fork() : -1;
    if (pid < 0) {
        res.exitCode = body();
        return res;
    }
    if (pid == 0) {
        // A child whose parent is killed (e.g. the GUI's time limit on `glimpse check file`)
        // goes with it instead of spinning on for minutes.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1) _exit(1);
        close(fds[0]);
        limitGrowth(memoryLimitBytes);
        std::ostringstream out, err;
        std::streambuf* oldOut = std::cout.rdbuf(out.rdbuf());
        std::streambuf* oldErr = std::cerr.rdbuf(err.rdbuf());
        int rc = 1;
        try {
            rc = body();
        } catch (...) {
            rc = 1;
        }
        std::cout.rdbuf(oldOut);
        std::cerr.rdbuf(oldErr);
        sendStreams(fds[1], out.str(), err.str());
        std::fflush(nullptr);
        // Leave without running the parent's atexit handlers or static destructors a second time.
        _exit(rc & 0xff);
    }
    close(fds[1]);
    int status = 0;
    std::string bytes;
    if (!waitFor(pid, fds[0], timeoutSeconds, &status, &bytes)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        close(fds[0]);
        res.timedOut = true;
        res.signal = SIGKILL;
        return res;
    }
    close(fds[0]);
    forwardStreams(bytes);
    if (WIFEXITED(status)) res.exitCode = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) res.signal = WTERMSIG(status);
    return res;
}

} // namespace glimpse
