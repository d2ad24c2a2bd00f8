#include "core/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace glimpse {

namespace {

std::string errnoText() { return std::strerror(errno); }

void fsyncPath(const std::string& p, int flags, bool required, const std::string& target) {
    int fd = ::open(p.c_str(), flags | O_CLOEXEC);
    if (fd < 0) {
        if (required) throw Error(target + ": cannot reopen the temporary file to sync it: " + errnoText());
        return;
    }
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    // Some file systems cannot fsync a directory (EINVAL): that only weakens durability.
    if (rc != 0 && required) throw Error(target + ": cannot sync to disk: " + std::strerror(err));
}

std::string parentDir(const std::string& path) {
    auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

} // namespace

void writeFileAtomically(const std::string& path,
                         const std::function<void(const std::string& tmpPath)>& write) {
    static std::atomic<unsigned> counter{0};
    if (path.empty()) throw Error("cannot write a file with an empty name");
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" +
                            std::to_string(counter.fetch_add(1));
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        const int err = errno;
        const std::string dir = parentDir(path);
        if (err == EACCES || err == EPERM || err == EROFS || err == ENOENT || err == ENOTDIR)
            throw Error(path + ": cannot write into the folder " + dir + ": " + std::strerror(err));
        throw Error(path + ": cannot create " + tmp + ": " + std::strerror(err));
    }
    ::close(fd);
    try {
        write(tmp);
        fsyncPath(tmp, O_RDONLY, true, path);
        if (::rename(tmp.c_str(), path.c_str()) != 0)
            throw Error(path + ": cannot replace the file: " + errnoText());
    } catch (...) {
        ::unlink(tmp.c_str());
        throw;
    }
    fsyncPath(parentDir(path), O_RDONLY | O_DIRECTORY, false, path);
}

void writeBytesAtomically(const std::string& path, const void* data, size_t size) {
    writeFileAtomically(path, [&](const std::string& tmp) {
        int fd = ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (fd < 0) throw Error(path + ": cannot write " + tmp + ": " + errnoText());
        const char* p = static_cast<const char*>(data);
        size_t left = size;
        while (left > 0) {
            ssize_t n = ::write(fd, p, left);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                int err = errno;
                ::close(fd);
                throw Error(path + ": write failed: " + std::strerror(err));
            }
            p += n;
            left -= size_t(n);
        }
        if (::close(fd) != 0) throw Error(path + ": write failed: " + errnoText());
    });
}

} // namespace glimpse
