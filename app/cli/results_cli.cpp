// Results files on the command line (issue 53): helpers of the evals' --out and
// `glimpse bench results`.
#include "app/cli/results_cli.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "app/cli/cli.h"
#include "app/cli/common.h"
#include "core/error.h"
#include "core/results/bench_results.h"

namespace glimpse::cli {

namespace fs = std::filesystem;

std::string commandLine(const std::string& prefix, const std::vector<std::string>& args) {
    std::string out = prefix;
    for (const auto& a : args) {
        const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`") == std::string::npos;
        if (plain) {
            out += " " + a;
            continue;
        }
        std::string q = "'";
        for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
        out += " " + q + "'";
    }
    return out;
}

void checkOutputFolder(const std::string& path, const std::string& option) {
    std::error_code ec;
    if (path.empty()) throw Error(option + ": expected a file name");
    if (fs::is_directory(path, ec)) throw Error(option + " " + path + ": is a folder, expected a file name (R.h5)");
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty() && !fs::is_directory(parent, ec))
        throw Error(option + " " + path + ": the folder " + parent.string() + " does not exist");
}

namespace {

const char* kBenchResultsUsage =
    "usage: glimpse bench results [--samples N] [--entities E] [--layers L] [--keep-lines K] [--out R.h5]\n"
    "                             [--repeats R] [--seed S]\n"
    "       glimpse bench results --file R.h5 [--repeats R]\n"
    "Writes a synthetic but real-shaped LETR results file (default: 10000 images of 512x512 with\n"
    "40-110 ground-truth lines, 1000 entities in each of 12 decoder layers plus LSD; lines matched by\n"
    "the eval's own code, K = 40 best lines kept per row and image) through the real writer, then\n"
    "reopens it and reports its size, open time and memory, the per-sample table's sort and filter\n"
    "times and the time to read one image's lines. The file goes to --out (default: a temporary\n"
    "file, removed afterwards). --file measures an existing LETR results file instead (run it in a\n"
    "fresh process for the open-file memory alone).\n";

} // namespace

int benchResults(const std::vector<std::string>& args) {
    if (std::find(args.begin(), args.end(), "--help") != args.end() || std::find(args.begin(), args.end(), "-h") != args.end()) {
        std::cout << kBenchResultsUsage;
        return 0;
    }
    results::BenchResultsOptions o;
    bool temporary = false;
    Args a(args);
    a.checkKnown({"--samples", "--entities", "--layers", "--keep-lines", "--out", "--repeats", "--seed", "--file"});
    if (!a.positional().empty()) throw UsageError("unexpected argument '" + a.positional().front() + "'");
    if (a.has("--file")) {
        for (const char* k : {"--samples", "--entities", "--layers", "--keep-lines", "--out", "--seed"})
            if (a.has(k)) throw UsageError(std::string("--file measures an existing file: ") + k + " does not apply");
        o.path = *a.get("--file");
        o.write = false;
    } else {
        o.samples = a.getInt("--samples", o.samples);
        o.entities = int(a.getInt("--entities", o.entities));
        o.layers = int(a.getInt("--layers", o.layers));
        o.keepLines = a.getInt("--keep-lines", o.keepLines);
        o.seed = uint64_t(a.getInt("--seed", 1));
        if (o.samples < 1 || o.entities < 1 || o.layers < 1 || o.layers > 64)
            throw UsageError("--samples and --entities must be >= 1, --layers in 1..64");
        if (o.keepLines < 1 && o.keepLines != -1) throw UsageError("--keep-lines: expected a positive integer or -1 (all)");
        if (a.has("--out")) {
            o.path = *a.get("--out");
            checkOutputFolder(o.path, "--out");
        } else {
            o.path = (fs::temp_directory_path() / ("glimpse_bench_results_" + std::to_string(::getpid()) + ".h5")).string();
            temporary = true;
        }
    }
    o.repeats = int(a.getInt("--repeats", 5));
    if (o.repeats < 1) throw UsageError("--repeats: expected a positive integer");
    struct Remove {
        std::string path;
        ~Remove() {
            if (!path.empty()) {
                std::error_code ec;
                fs::remove(path, ec);
            }
        }
    } remove{temporary ? o.path : ""};
    results::BenchResultsFigures f;
    {
        CountProgress progress("  writing ", " samples");
        f = results::benchResults(o, progress.fn());
    }
    std::cout << results::formatBenchResults(o, f);
    return 0;
}

} // namespace glimpse::cli
