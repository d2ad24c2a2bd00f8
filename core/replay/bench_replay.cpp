#include "core/replay/bench_replay.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <unistd.h>

#include "core/error.h"
#include "core/info.h"
#include "core/replay/episode_reader.h"
#include "core/rl/episode.h"
#include "core/util/timing.h"

namespace fs = std::filesystem;

namespace glimpse::replay {

namespace {

uint32_t hash32(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return uint32_t(x);
}

void fillRect(uint8_t* out, int64_t H, int64_t W, int64_t y0, int64_t x0, int64_t h, int64_t w, const uint8_t rgb[3]) {
    for (int64_t y = std::max<int64_t>(0, y0); y < std::min(H, y0 + h); ++y)
        for (int64_t x = std::max<int64_t>(0, x0); x < std::min(W, x0 + w); ++x) {
            uint8_t* p = out + (y * W + x) * 3;
            p[0] = rgb[0];
            p[1] = rgb[1];
            p[2] = rgb[2];
        }
}

void measure(BenchReplayResult& r, const BenchReplayOptions& o, bool synthetic);

} // namespace

void syntheticFrame(int64_t t, int64_t H, int64_t W, uint8_t* out) {
    const uint8_t bg[3] = {12, 16, 40}, paddle[3] = {200, 72, 72}, ball[3] = {236, 236, 236}, brick[3] = {66, 160, 72};
    for (int64_t i = 0; i < H * W; ++i) {
        out[i * 3] = bg[0];
        out[i * 3 + 1] = bg[1];
        out[i * 3 + 2] = bg[2];
    }
    // A row of bricks that loses one brick every 64 steps, a paddle and a bouncing ball.
    const int64_t bw = std::max<int64_t>(W / 12, 1);
    for (int64_t b = 0; b < 12; ++b)
        if (((t / 64) % 13) <= b) fillRect(out, H, W, H / 8, b * bw, std::max<int64_t>(H / 24, 1), bw - 1, brick);
    const int64_t px = (t * 2) % std::max<int64_t>(W - W / 6, 1);
    fillRect(out, H, W, H - H / 12, px, std::max<int64_t>(H / 32, 1), W / 6, paddle);
    const int64_t period = 2 * std::max<int64_t>(H - 4, 1);
    const int64_t by = (t * 3) % period < period / 2 ? (t * 3) % period : period - (t * 3) % period;
    const int64_t bx = (t * 5) % std::max<int64_t>(W - 3, 1);
    fillRect(out, H, W, by / 2 + H / 4, bx, 3, 3, ball);
    // A small patch of noise (as a score display or sprite detail would): no two frames compress alike.
    for (int64_t y = 0; y < std::min<int64_t>(6, H); ++y)
        for (int64_t x = 0; x < std::min<int64_t>(24, W); ++x) {
            const uint32_t h = hash32(uint64_t(t) * 1315423911ULL + uint64_t(y * 64 + x));
            uint8_t* p = out + (y * W + x) * 3;
            p[0] = uint8_t(h);
            p[1] = uint8_t(h >> 8);
            p[2] = uint8_t(h >> 16);
        }
}

rl::Episode syntheticEpisode(int64_t T, const std::string& source, int64_t rewardEvery) {
    const int64_t A = 4;
    rl::Episode e;
    e.env = "synthetic";
    e.source = source;
    e.actionNames = {"NOOP", "FIRE", "RIGHT", "LEFT"};
    e.actions = torch::arange(T, torch::kInt64).remainder(A);
    e.rewards = torch::zeros({T});
    e.rewards.slice(0, 0, T, rewardEvery).fill_(1.f);
    e.lives = (5 - torch::arange(T, torch::kInt64).div(std::max<int64_t>(T / 5, 1), "floor")).clamp_min(1).to(torch::kInt32);
    e.terminal = true;
    e.episodeReturn = e.rewards.sum().item<double>();
    e.hasModel = true;
    e.model.family = "efficientzero";
    e.model.checkpoint = "(synthetic)";
    e.model.config = "{}";
    e.model.simulations = 16;
    e.model.value = torch::sin(torch::arange(T, torch::kFloat32) * 0.01f);
    e.model.valuePrefix = e.model.value * 0.5f;
    e.model.rootValues = e.model.value * 0.9f;
    e.model.policy = torch::softmax(torch::rand({T, A}), 1);
    e.model.visitCounts = torch::randint(0, 5, {T, A}, torch::kInt32);
    e.model.childrenQ = torch::rand({T, A});
    e.model.childrenPrior = e.model.policy.clone();
    return e;
}

BenchReplayResult benchReplay(const BenchReplayOptions& o) {
    if (o.steps < 1 || o.height < 8 || o.width < 8) throw Error("bench replay: needs steps >= 1 and frames of at least 8x8");
    const auto log = [&](const std::string& s) {
        if (o.log) o.log(s);
    };
    BenchReplayResult r;
    r.rssStartKiB = currentRssKiB();
    if (!o.file.empty()) {
        r.path = o.file;
        r.fileBytes = fs::exists(o.file) ? (long long)fs::file_size(o.file) : 0;
        measure(r, o, false);
        return r;
    }
    r.written = true;
    r.steps = o.steps;
    r.height = o.height;
    r.width = o.width;
    const bool tempDir = o.dir.empty();
    const fs::path dir = tempDir ? fs::temp_directory_path() / ("glimpse-bench-replay-" + std::to_string(::getpid())) : fs::path(o.dir);
    fs::create_directories(dir);
    r.path = (dir / "bench_episode.h5").string();
    struct Cleanup {
        const BenchReplayOptions& o;
        fs::path dir, file;
        bool temp;
        ~Cleanup() {
            std::error_code ec;
            if (!o.keep) fs::remove(file, ec);
            if (temp && !o.keep) fs::remove_all(dir, ec);
        }
    } cleanup{o, dir, r.path, tempDir};

    // ---- write ----------------------------------------------------------------------------
    const int64_t T = o.steps, H = o.height, W = o.width;
    rl::Episode e = syntheticEpisode(T, "glimpse bench replay", 50);
    rl::FrameSource src;
    src.height = H;
    src.width = W;
    src.channels = 3;
    src.batch = std::max<int64_t>(1, int64_t(8 << 20) / (H * W * 3));
    int64_t lastReported = 0;
    src.frames = [&](int64_t first, int64_t n) {
        torch::Tensor t = torch::empty({n, H, W, 3}, torch::kUInt8);
        uint8_t* p = t.data_ptr<uint8_t>();
        for (int64_t i = 0; i < n; ++i) syntheticFrame(first + i, H, W, p + i * H * W * 3);
        if (first + n - lastReported >= T / 10 || first + n == T) {
            lastReported = first + n;
            log("  written " + std::to_string(first + n) + " / " + std::to_string(T) + " frames");
        }
        return t;
    };
    log("writing a " + std::to_string(T) + "-step " + std::to_string(H) + "x" + std::to_string(W) + " RGB episode to " + r.path);
    auto t0 = std::chrono::steady_clock::now();
    rl::writeEpisode(r.path, e, src);
    r.writeSeconds = msSince(t0) / 1000.0;
    r.fileBytes = (long long)fs::file_size(r.path);
    e = rl::Episode();   // free the per-step tensors before measuring memory
    src = rl::FrameSource();
    measure(r, o, true);
    return r;
}

namespace {

void measure(BenchReplayResult& r, const BenchReplayOptions& o, bool synthetic) {
    const auto log = [&](const std::string& s) {
        if (o.log) o.log(s);
    };
    // ---- open -----------------------------------------------------------------------------
    r.rssBeforeOpenKiB = currentRssKiB();
    auto t0 = std::chrono::steady_clock::now();
    ReaderOptions ro;
    ro.cacheBytes = o.cacheBytes;
    EpisodeReader reader(r.path, ro);
    r.openMs = msSince(t0);
    const int64_t T = reader.length();
    r.steps = T;
    r.height = reader.frameHeight();
    r.width = reader.frameWidth();
    if (T < 1) throw Error(r.path + ": the episode has no steps to scrub");
    r.rssAfterOpenKiB = currentRssKiB();
    log("opened in " + std::to_string(r.openMs) + " ms");

    // ---- scrub ----------------------------------------------------------------------------
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int64_t> pick(0, T - 1);
    std::vector<double> times;
    std::vector<int64_t> picked;
    for (int64_t i = 0; i < o.scrubs; ++i) {
        const int64_t t = pick(rng);
        picked.push_back(t);
        t0 = std::chrono::steady_clock::now();
        FramePtr f = reader.frame(t);
        times.push_back(msSince(t0));
        if (!f || f->step != t) throw Error("bench replay: frame " + std::to_string(t) + " came back wrong");
    }
    r.scrubP50Ms = percentile(times, 0.5);
    r.scrubP95Ms = percentile(times, 0.95);
    r.scrubMaxMs = times.empty() ? 0 : *std::max_element(times.begin(), times.end());
    times.clear();
    const int64_t s0 = T / 3;
    for (int64_t t = s0; t < std::min(T, s0 + o.sequential); ++t) {
        t0 = std::chrono::steady_clock::now();
        reader.frame(t);
        times.push_back(msSince(t0));
    }
    r.sequentialP50Ms = percentile(times, 0.5);
    r.sequentialP95Ms = percentile(times, 0.95);
    times.clear();
    const int64_t hot = std::min<int64_t>(200, std::min(T, o.sequential));
    for (int64_t t = s0 + std::min(T, o.sequential) - hot; t < s0 + std::min(T, o.sequential); ++t) {
        if (t < 0 || t >= T) continue;
        t0 = std::chrono::steady_clock::now();
        reader.frame(t);
        times.push_back(msSince(t0));
    }
    r.cachedP50Ms = percentile(times, 0.5);
    r.cachedP95Ms = percentile(times, 0.95);
    r.rssAfterScrubKiB = currentRssKiB();
    r.peakRssKiB = peakRssKiB();
    r.cache = reader.cacheStats();
    if (synthetic) {   // spot-check the pixels of a random frame against the generator
        const int64_t check = picked.empty() ? 0 : picked.front();
        std::vector<uint8_t> want(size_t(r.height * r.width * 3));
        syntheticFrame(check, r.height, r.width, want.data());
        if (reader.frame(check)->pixels != want)
            throw Error("bench replay: frame " + std::to_string(check) + " differs from what was written");
    }
}

} // namespace

std::string formatBenchReplay(const BenchReplayResult& r) {
    char buf[2048];
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", r.writeSeconds);
    const std::string file = humanBytes(r.fileBytes) + (r.written ? ", written in " + std::string(seconds) + " s" : ", existing file");
    std::snprintf(buf, sizeof buf,
                  "replay bench: %lld steps of %lldx%lld frames\n"
                  "  file:         %s (%s)\n"
                  "  open:         %.1f ms\n"
                  "  memory (RSS): %.1f MiB at start, %.1f MiB before open, %.1f MiB after open, %.1f MiB after scrubbing (peak %.1f MiB)\n"
                  "  random scrub: p50 %.3f ms, p95 %.3f ms, max %.3f ms per frame\n"
                  "  playback:     p50 %.3f ms, p95 %.3f ms per frame (in order)\n"
                  "  cached:       p50 %.4f ms, p95 %.4f ms per frame\n"
                  "  frame cache:  %zu frames, %s of %s; %lld hits, %lld misses, %lld evictions\n",
                  (long long)r.steps, (long long)r.width, (long long)r.height, r.path.c_str(), file.c_str(), r.openMs,
                  r.rssStartKiB / 1024.0, r.rssBeforeOpenKiB / 1024.0, r.rssAfterOpenKiB / 1024.0, r.rssAfterScrubKiB / 1024.0,
                  r.peakRssKiB / 1024.0, r.scrubP50Ms, r.scrubP95Ms, r.scrubMaxMs, r.sequentialP50Ms, r.sequentialP95Ms,
                  r.cachedP50Ms, r.cachedP95Ms, r.cache.frames, humanBytes((long long)r.cache.bytes).c_str(),
                  humanBytes((long long)r.cache.capacity).c_str(), (long long)r.cache.hits, (long long)r.cache.misses,
                  (long long)r.cache.evictions);
    return buf;
}

} // namespace glimpse::replay
