#include <algorithm>
#include <iostream>
#include <new>

#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "core/error.h"
#include "core/file_kind.h"
#include "core/info.h"
#include "core/replay/episode_reader.h"
#include "core/util/isolate.h"

namespace glimpse::cli {

namespace {
// How long one file may take to be read before it counts as one that hangs libhdf5.
constexpr double kReadTimeoutSeconds = 60;
// How much memory reading one file's structure may add. Headers and attributes take kilobytes;
// a damaged file can declare a 5 GB string, which libhdf5 then allocates (fuzz finding 15).
constexpr size_t kStructureMemoryBytes = size_t(1) << 30;

// The error text of a read that failed: an allocation refused under kStructureMemoryBytes names the cause.
std::string readError(const std::exception& e) {
    if (dynamic_cast<const std::bad_alloc*>(&e) || std::string(e.what()).find("memory allocation failed") != std::string::npos)
        return std::string(e.what()) + " (reading the file's structure needed more than 1 GiB of memory: the file declares "
                                       "more data than it can hold, it is damaged)";
    return e.what();
}

// The files' commands take --timeout S (seconds > 0; default kReadTimeoutSeconds); info also --tensors.
double readTimeout(const Args& a, bool info = false) {
    a.checkKnown(info ? std::vector<std::string>{"--timeout", "--tensors"} : std::vector<std::string>{"--timeout"});
    const double timeout = a.getDouble("--timeout", kReadTimeoutSeconds);
    if (!(timeout > 0)) throw Error("--timeout: expected seconds > 0");
    return timeout;
}

// Reads each positional file of `a` with `read` in a child process (time limit --timeout,
// memory limit kStructureMemoryBytes); `failed(path, why)` reports a child that crashed or hung
// while `what` ("reading the file"). Exit code: 0 when every read returned 0, else 1.
int readEachIsolated(const Args& a, const std::string& what, const std::function<int(const std::string&)>& read,
                     const std::function<void(const std::string&, const std::string&)>& failed) {
    const double timeout = readTimeout(a);
    int rc = 0;
    for (const auto& path : a.positional()) {
        // In a child process: a file that crashes or hangs libhdf5 ends the child, not this command.
        const IsolatedResult r = runIsolated([&] { return read(path); }, timeout, kStructureMemoryBytes);
        if (!r.ok()) rc = 1;
        const std::string why = r.failure(what);
        if (!why.empty()) failed(path, why);
    }
    return rc;
}

std::function<int(const std::vector<std::string>&)>& follower() {
    static std::function<int(const std::vector<std::string>&)> fn;
    return fn;
}
} // namespace

void setRunLogFollower(std::function<int(const std::vector<std::string>&)> follow) { follower() = std::move(follow); }

int info(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << "usage: glimpse info FILE.h5 [FILE.h5 ...] [--tensors] [--timeout S]\n"
                     "       glimpse info --follow RUN.h5 [--interval S] [--timeout S] [--until-ended]\n"
                     "Describes a Glimpse HDF5 file (checkpoint, trace, run log, episode): a summary first (a\n"
                     "checkpoint's family, parameters, size, architecture, classes, and its training from the\n"
                     "run log beside it), then its kind, version and configuration; --tensors also lists every\n"
                     "dataset with shape and dtype. A file that is not HDF5 (an image, a video, a PyTorch\n"
                     "checkpoint) is named with the command that opens it.\n"
                     "A run log whose writer was killed is reported dead, not running.\n"
                     "Each file is read in a child process: a damaged file that crashes the HDF5 library,\n"
                     "or keeps it busy for more than S seconds (default 60), is reported, not fatal.\n"
                     "--follow follows a run log as the Training panel does (also across kills and\n"
                     "resumes), printing status and step changes, until it has finished (exit 0) or a\n"
                     "read fails (exit 1).\n";
        return args.empty() ? 2 : 0;
    }
    for (const auto& s : args)
        if (s == "--follow") {
            if (!follower())
                throw Error("--follow follows a run log with the Training panel's follower and needs a GUI build; "
                            "this glimpse was built headless (GLIMPSE_HEADLESS)");
            return follower()(args);
        }
    const Args a(args, {"--tensors"});
    readTimeout(a, true);   // bad usage before anything is read
    // Not HDF5 (an image, a video, ...): say what it is and which command opens it.
    std::vector<std::string> rest;
    int rc = 0;
    for (const auto& path : a.positional()) {
        bool recognized = false;
        const std::string other = describeNotHdf5(path, &recognized);
        if (other.empty()) rest.push_back(path);
        else if (recognized) std::cout << other;
        else {
            std::cerr << "glimpse info: " << other;
            rc = 1;
        }
    }
    if (rest.empty()) return rc;
    std::vector<std::string> h5args = rest;
    for (const char* k : {"--timeout"})
        if (auto v = a.get(k)) h5args.insert(h5args.end(), {k, *v});
    const bool tensors = a.has("--tensors");
    return std::max(rc, readEachIsolated(
        Args(h5args), "reading the file",
        [tensors](const std::string& path) {
            try {
                std::cout << describeH5(path, tensors);
                return 0;
            } catch (const std::exception& e) {
                std::cerr << "glimpse info: " << readError(e) << "\n";
                return 1;
            }
        },
        [](const std::string& path, const std::string& why) { std::cerr << "glimpse info: " << path << ": " << why << "\n"; }));
}

int checkFile(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cerr << "usage: glimpse check file FILE.h5 [FILE.h5 ...] [--timeout S]\n"
                     "Reads each file's whole HDF5 structure (every group, dataset header and attribute, as\n"
                     "`glimpse info` does; an episode is also opened as the replay viewer opens it) and prints\n"
                     "one JSON line per file: its kind, format version and family, or the error.\n"
                     "Exit 0 when every file is a readable Glimpse file, 1 otherwise.\n"
                     "Each file is read in a child process; a crash of the HDF5 library, or more than S\n"
                     "seconds (default 60) on one file, is reported as that file's error.\n"
                     "The GUI runs it in a child process before it opens an .h5 file, so that a damaged file\n"
                     "that crashes or hangs the HDF5 library cannot take the GUI down (docs/hardening.md).\n";
        return args.empty() ? 2 : 0;
    }
    return readEachIsolated(
        Args(args), "reading the file's structure",
        [](const std::string& path) {
            nlohmann::json line = {{"file", path}};
            int code = 0;
            try {
                (void)describeH5(path);   // walks everything an opener could touch first
                readEveryStringAttribute(path);
                const FileKind k = identifyGlimpseFile(path);
                // An episode is opened as the replay viewer opens it (metadata and per-step
                // arrays, then its first frame), so a file the viewer would refuse is refused
                // here, in the child, with the viewer's message.
                if (k.kind == "glimpse.episode") {
                    replay::EpisodeReader episode(path);
                    if (episode.length() > 0) (void)episode.frame(0);
                }
                line["kind"] = k.kind;
                line["format_version"] = k.formatVersion;
                line["family"] = k.family;
            } catch (const std::exception& e) {
                line["error"] = readError(e);
                code = 1;
            }
            std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
            return code;
        },
        [](const std::string& path, const std::string& why) {
            const nlohmann::json line = {{"file", path}, {"error", path + ": " + why}};
            std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
        });
}

} // namespace glimpse::cli
