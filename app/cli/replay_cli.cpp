// glimpse bench replay and glimpse data import-episode (core/replay).
#include "app/cli/replay_cli.h"

#include <iostream>
#include <sstream>

#include "app/cli/cli.h"
#include "core/error.h"
#include "core/info.h"
#include "core/replay/bench_replay.h"
#include "core/replay/import.h"
#include "core/util/isolate.h"

namespace glimpse::cli {

// An import that reads this long is taken for a file that hangs libhdf5.
constexpr double kImportTimeoutSeconds = 3600;

const char* kBenchReplayUsage =
    "usage: glimpse bench replay [--steps N] [--size S] [--scrubs K] [--cache-mb M] [--dir DIR] [--keep]\n"
    "       glimpse bench replay --file EPISODE.h5 [--scrubs K] [--cache-mb M]\n"
    "Writes a synthetic N-step (default 100000) episode of SxS (default 96) RGB frames, reopens it\n"
    "and reports open time, resident memory and frame times: K (default 2000) random scrubs,\n"
    "in-order playback and cache hits, with an M MiB (default 64) frame cache. The episode goes to\n"
    "a temporary folder (or DIR) and is removed afterwards unless --keep. --file measures an existing\n"
    "episode instead (in a fresh process, so the memory figures are the reader's alone).\n";

const char* kImportEpisodeUsage =
    "usage: glimpse data import-episode --minari FILE.hdf5 [--episode N] --out E.h5 [--game G] [--actions A,B,...]\n"
    "       glimpse data import-episode --frames DIR [--csv FILE] [--episode-id N] --out E.h5 [--game G] [--actions A,B,...]\n"
    "       glimpse data import-episode --minari FILE.hdf5 --list\n"
    "Imports an episode recorded elsewhere into a Glimpse episode file (docs/formats.md, 'Importing\n"
    "episodes'): episode N (default 0) of a Minari HDF5 dataset (main_data.hdf5, its data/ folder or\n"
    "the dataset folder), or a folder of PNG frames with a CSV of frame_id, action, reward\n"
    "[, episode_id, terminal, lives] (default: the one .csv or .txt file in DIR). --actions names the\n"
    "actions (default: the Atari full action set NOOP,FIRE,UP,... where it fits). --list prints the\n"
    "episodes of a Minari file.\n";

namespace {

std::vector<std::string> splitNames(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

bool wantsHelp(const std::vector<std::string>& args) {
    for (const auto& a : args)
        if (a == "--help" || a == "-h") return true;
    return false;
}

} // namespace

int benchReplay(const std::vector<std::string>& args) {
    if (wantsHelp(args)) {
        std::cout << kBenchReplayUsage;
        return 0;
    }
    replay::BenchReplayOptions o;
    try {
        Args a(args, {"--keep"});
        a.checkKnown({"--steps", "--size", "--scrubs", "--cache-mb", "--dir", "--keep", "--file"});
        if (a.has("--file") && (a.has("--steps") || a.has("--size") || a.has("--dir") || a.has("--keep")))
            throw Error("--file measures an existing episode: --steps, --size, --dir and --keep do not apply");
        o.file = a.get("--file", "");
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional().front() + "'");
        o.steps = a.getInt("--steps", o.steps);
        o.height = o.width = a.getInt("--size", 96);
        o.scrubs = a.getInt("--scrubs", o.scrubs);
        const long long mb = a.getInt("--cache-mb", 64);
        if (o.steps < 1 || o.height < 8 || o.height > 4096 || o.scrubs < 0 || mb < 0)
            throw Error("--steps must be >= 1, --size in 8..4096, --scrubs and --cache-mb >= 0");
        o.cacheBytes = size_t(mb) << 20;
        o.dir = a.get("--dir", "");
        o.keep = a.has("--keep");
    } catch (const Error& e) {
        std::cerr << "glimpse bench replay: " << e.what() << "\n" << kBenchReplayUsage;
        return 2;
    }
    o.log = [](const std::string& s) { std::cerr << s << "\n"; };
    try {
        const auto r = replay::benchReplay(o);
        std::cout << replay::formatBenchReplay(r);
    } catch (const std::exception& e) {
        std::cerr << "glimpse bench replay: " << e.what() << "\n";
        return 1;
    }
    return 0;
}

int importEpisode(const std::vector<std::string>& args) {
    if (args.empty() || wantsHelp(args)) {
        std::cout << kImportEpisodeUsage;
        return args.empty() ? 2 : 0;
    }
    Args a(args, {"--list"});
    try {
        a.checkKnown({"--minari", "--episode", "--frames", "--csv", "--episode-id", "--out", "--game", "--actions", "--list"});
        if (!a.positional().empty()) throw Error("unexpected argument '" + a.positional().front() + "'");
        if (a.has("--minari") == a.has("--frames")) throw Error("give one of --minari FILE or --frames DIR");
        if (a.has("--list") && !a.has("--minari")) throw Error("--list goes with --minari");
        if (!a.has("--list") && !a.has("--out")) throw Error("missing --out E.h5");
        if (a.has("--minari") && (a.has("--csv") || a.has("--episode-id")))
            throw Error("--csv and --episode-id go with --frames");
        if (a.has("--frames") && a.has("--episode")) throw Error("--episode goes with --minari (use --episode-id with --frames)");
        if (a.getInt("--episode", 0) < 0) throw Error("--episode must be >= 0");
        a.getInt("--episode-id", -1);
    } catch (const Error& e) {
        std::cerr << "glimpse data import-episode: " << e.what() << "\n" << kImportEpisodeUsage;
        return 2;
    }
    // In a child process: a foreign file that crashes or hangs libhdf5 ends the child, not this
    // command (core/util/isolate.h); the output is written atomically, so nothing half-written stays.
    const std::string source = a.has("--minari") ? a.require("--minari") : a.require("--frames");
    const IsolatedResult r = runIsolated(
        [&]() -> int {
            try {
                const std::vector<std::string> names = splitNames(a.get("--actions", ""));
                if (a.has("--list")) {
                    const auto eps = replay::minariEpisodes(a.require("--minari"));
                    std::cout << replay::findMinariFile(a.require("--minari")) << ": " << eps.size() << " episodes";
                    for (auto n : eps) std::cout << " " << n;
                    std::cout << "\n";
                    return 0;
                }
                const std::string out = a.require("--out");
                if (a.has("--minari")) {
                    replay::MinariImportOptions o;
                    o.episode = a.getInt("--episode", 0);
                    o.game = a.get("--game", "");
                    o.actionNames = names;
                    replay::importMinari(a.require("--minari"), out, o);
                } else {
                    replay::FramesImportOptions o;
                    o.csv = a.get("--csv", "");
                    o.game = a.get("--game", "");
                    o.actionNames = names;
                    o.episodeId = a.getInt("--episode-id", -1);
                    replay::importFrames(a.require("--frames"), out, o);
                }
                std::cout << "wrote " << out << "\n" << describeEpisode(out);
            } catch (const std::exception& e) {
                std::cerr << "glimpse data import-episode: " << e.what() << "\n";
                return 1;
            }
            return 0;
        },
        kImportTimeoutSeconds);
    const std::string why = r.failure("reading it");
    if (!why.empty()) std::cerr << "glimpse data import-episode: " << source << ": " << why << "\n";
    return r.signal != 0 || r.timedOut ? 1 : r.exitCode;
}

} // namespace glimpse::cli
