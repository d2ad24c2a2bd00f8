#include "core/dist/dist.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "core/error.h"

namespace glimpse::dist {

std::string Settings::describe() const {
    return "rank " + std::to_string(rank) + " of " + std::to_string(worldSize) + " (" + backend + ", " + masterAddr +
           ":" + std::to_string(masterPort) + ")";
}

namespace {

// The value of a setting: the flag when given, else the environment variable, else none.
struct Source {
    const std::map<std::string, std::string>& overrides;
    std::optional<std::pair<std::string, std::string>> get(const std::string& flag, const char* env) const {
        if (auto it = overrides.find(flag); it != overrides.end()) return std::make_pair("--" + flag, it->second);
        if (const char* v = std::getenv(env); v && *v) return std::make_pair(std::string(env), std::string(v));
        return std::nullopt;
    }
};

int64_t wholeNumber(const std::pair<std::string, std::string>& kv) {
    const std::string& s = kv.second;
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size())
        throw Error(kv.first + "=" + s + " is not a whole number");
    return v;
}

std::string what(const std::exception& e) {
    std::string m = e.what();
    // c10::Error appends a C++ stack ("Exception raised from ..."); the first line says it.
    if (const auto nl = m.find("\nException raised from"); nl != std::string::npos) m.resize(nl);
    return m;
}

} // namespace

Settings settingsFromEnvironment(const std::map<std::string, std::string>& overrides) {
    const Source src{overrides};
    Settings s;
    if (auto v = src.get("world-size", "WORLD_SIZE")) {
        const int64_t n = wholeNumber(*v);
        if (n < 1 || n > 65536) throw Error(v->first + "=" + v->second + " must be between 1 and 65536");
        s.worldSize = int(n);
    }
    if (auto v = src.get("rank", "RANK")) {
        const int64_t r = wholeNumber(*v);
        if (r < 0 || r >= s.worldSize)
            throw Error(v->first + "=" + v->second + " is outside 0.." + std::to_string(s.worldSize - 1) +
                        " (WORLD_SIZE " + std::to_string(s.worldSize) + ")");
        s.rank = int(r);
    } else if (s.worldSize > 1) {
        throw Error("WORLD_SIZE is " + std::to_string(s.worldSize) + " but RANK is not set (set it, or --rank)");
    }
    if (auto v = src.get("local-rank", "LOCAL_RANK")) {
        const int64_t r = wholeNumber(*v);
        if (r < 0) throw Error(v->first + "=" + v->second + " must not be negative");
        s.localRank = int(r);
    } else {
        s.localRank = s.rank;
    }
    const auto addr = src.get("master-addr", "MASTER_ADDR");
    const auto port = src.get("master-port", "MASTER_PORT");
    if (s.worldSize > 1 && (!addr || !port))
        throw Error("a distributed run (WORLD_SIZE " + std::to_string(s.worldSize) +
                    ") needs MASTER_ADDR and MASTER_PORT (or --master-addr and --master-port)");
    if (addr) s.masterAddr = addr->second;
    if (port) {
        const int64_t p = wholeNumber(*port);
        if (p < 1 || p > 65535) throw Error(port->first + "=" + port->second + " is not a port (1..65535)");
        s.masterPort = int(p);
    }
    if (auto v = src.get("dist-timeout", "GLIMPSE_DIST_TIMEOUT")) {
        const int64_t secs = wholeNumber(*v);
        if (secs < 1) throw Error(v->first + "=" + v->second + " must be at least 1 (seconds)");
        s.timeout = std::chrono::seconds(secs);
    }
    return s;
}

// ---- Communicator --------------------------------------------------------------------------

struct Communicator::Pending {
    c10::intrusive_ptr<c10d::Work> work;
    std::string op;
};

struct Communicator::Impl {
    Settings s;
    c10::intrusive_ptr<c10d::Store> store;
    c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
    std::atomic<int64_t> bytes{0};

    [[noreturn]] void fail(const std::string& op, const std::exception& e) const {
        throw Error(s.describe() + ": " + op + " failed (another rank stopped, or did not take part within " +
                    std::to_string(s.timeout.count() / 1000) + " s): " + what(e));
    }
    void wait(const c10::intrusive_ptr<c10d::Work>& w, const std::string& op) {
        try {
            w->wait(s.timeout);
        } catch (const std::exception& e) {
            fail(op, e);
        }
    }
    // c10d's collectives take one tensor per device; several tensors of one process travel
    // as one flat buffer (per dtype run: they must share one), copied back afterwards.
    template <class Op>
    void flat(std::vector<torch::Tensor>& ts, const std::string& op, Op&& run) {
        if (ts.empty()) return;
        for (const auto& t : ts)
            if (t.scalar_type() != ts[0].scalar_type())
                throw Error(s.describe() + ": " + op + " of tensors with different dtypes");
        std::vector<torch::Tensor> parts;
        for (const auto& t : ts) parts.push_back(t.reshape(-1));
        std::vector<torch::Tensor> buf{torch::cat(parts)};
        bytes += payload(buf);
        wait(run(buf), op);
        int64_t at = 0;
        torch::NoGradGuard ng;
        for (auto& t : ts) {
            t.copy_(buf[0].narrow(0, at, t.numel()).view(t.sizes()));
            at += t.numel();
        }
    }
    static int64_t payload(const std::vector<torch::Tensor>& ts) {
        int64_t n = 0;
        for (const auto& t : ts) n += t.numel() * int64_t(t.element_size());
        return n;
    }
};

Communicator::Communicator(const Settings& settings) : d(std::make_unique<Impl>()) {
    d->s = settings;
    if (settings.backend != "gloo")
        throw Error("distributed backend '" + settings.backend + "' is not available in this build (gloo is)");
    if (!settings.distributed()) return;
    try {
        c10d::TCPStoreOptions so;
        so.port = uint16_t(settings.masterPort);
        so.isServer = settings.rank == 0;
        so.numWorkers = size_t(settings.worldSize);
        so.waitWorkers = true;
        so.timeout = settings.timeout;
        d->store = c10::make_intrusive<c10d::TCPStore>(settings.masterAddr, so);
    } catch (const std::exception& e) {
        throw Error(settings.describe() + ": rendezvous at " + settings.masterAddr + ":" +
                    std::to_string(settings.masterPort) + " failed (all " + std::to_string(settings.worldSize) +
                    " ranks must start within " + std::to_string(settings.timeout.count() / 1000) + " s): " + what(e));
    }
    try {
        auto o = c10d::ProcessGroupGloo::Options::create();
        o->timeout = settings.timeout;
        // The interface Gloo's pairs listen on: GLOO_SOCKET_IFNAME as with PyTorch, else
        // loopback for a run on one machine, else the address this host's name resolves to.
        const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
        const bool local = settings.masterAddr == "localhost" || settings.masterAddr.rfind("127.", 0) == 0;
        if (ifname && *ifname)
            o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
        else if (local)
            o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        else
            o->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
        o->threads = 2;
        d->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(d->store, settings.rank, settings.worldSize, o);
    } catch (const std::exception& e) {
        throw Error(settings.describe() + ": rendezvous at " + settings.masterAddr + ":" +
                    std::to_string(settings.masterPort) + " failed while connecting to the other ranks (all " +
                    std::to_string(settings.worldSize) + " must start within " +
                    std::to_string(settings.timeout.count() / 1000) + " s): " + what(e));
    }
}

Communicator::~Communicator() = default;

int Communicator::rank() const { return d->s.rank; }
int Communicator::worldSize() const { return d->s.worldSize; }
const Settings& Communicator::settings() const { return d->s; }
int64_t Communicator::bytesReduced() const { return d->bytes; }

void Communicator::allReduce(std::vector<torch::Tensor>& tensors, bool average) {
    if (!d->pg) return;
    d->flat(tensors, "all-reduce", [&](std::vector<torch::Tensor>& buf) { return d->pg->allreduce(buf); });
    if (average)
        for (auto& t : tensors) t.div_(double(d->s.worldSize));
}

void Communicator::broadcast(std::vector<torch::Tensor>& tensors, int root) {
    if (!d->pg) return;
    c10d::BroadcastOptions o;
    o.rootRank = root;
    d->flat(tensors, "broadcast", [&](std::vector<torch::Tensor>& buf) { return d->pg->broadcast(buf, o); });
}

std::vector<double> Communicator::allGather(double value) {
    if (!d->pg) return {value};
    std::vector<torch::Tensor> in{torch::full({1}, value, torch::kFloat64)};
    std::vector<std::vector<torch::Tensor>> out(1);
    for (int r = 0; r < d->s.worldSize; ++r) out[0].push_back(torch::empty({1}, torch::kFloat64));
    d->wait(d->pg->allgather(out, in), "all-gather");
    std::vector<double> v;
    for (const auto& t : out[0]) v.push_back(t.item<double>());
    return v;
}

std::vector<torch::Tensor> Communicator::gatherBytes(const torch::Tensor& bytes, int root) {
    if (!bytes.defined() || bytes.dim() != 1 || bytes.scalar_type() != torch::kUInt8)
        throw Error(d->s.describe() + ": gatherBytes takes a 1-D uint8 tensor");
    if (!d->pg) return {bytes.clone()};
    const std::vector<double> lengths = allGather(double(bytes.numel()));
    int64_t longest = 1;
    for (double n : lengths) longest = std::max(longest, int64_t(n));
    std::vector<torch::Tensor> in{torch::zeros({longest}, torch::kUInt8)};
    in[0].narrow(0, 0, bytes.numel()).copy_(bytes);
    std::vector<std::vector<torch::Tensor>> out;
    if (d->s.rank == root) {
        out.resize(1);
        for (int r = 0; r < d->s.worldSize; ++r) out[0].push_back(torch::empty({longest}, torch::kUInt8));
    }
    c10d::GatherOptions o;
    o.rootRank = root;
    d->bytes += longest;
    d->wait(d->pg->gather(out, in, o), "gather");
    std::vector<torch::Tensor> result;
    if (d->s.rank == root)
        for (int r = 0; r < d->s.worldSize; ++r) result.push_back(out[0][size_t(r)].narrow(0, 0, int64_t(lengths[size_t(r)])));
    return result;
}

void Communicator::barrier() {
    if (!d->pg) return;
    d->wait(d->pg->barrier(), "barrier");
}

std::shared_ptr<Communicator::Pending> Communicator::allReduceAsync(torch::Tensor flat) {
    auto p = std::make_shared<Pending>();
    p->op = "gradient all-reduce";
    if (!d->pg) return p;
    std::vector<torch::Tensor> ts{std::move(flat)};
    d->bytes += Impl::payload(ts);
    try {
        p->work = d->pg->allreduce(ts);
    } catch (const std::exception& e) {
        d->fail(p->op, e);
    }
    return p;
}

void Communicator::wait(Pending& p) {
    if (p.work) d->wait(p.work, p.op);
    p.work.reset();
}

// ---- GradientReducer -----------------------------------------------------------------------

struct GradientReducer::Impl {
    struct Bucket {
        std::vector<int> params;
        std::vector<int64_t> offsets;   // into flat, per entry of params
        torch::Tensor flat;
        std::vector<bool> got;
        int ready = 0;
        std::shared_ptr<Communicator::Pending> pending;
    };
    Communicator* comm = nullptr;
    std::vector<torch::Tensor> params;
    std::vector<unsigned> hooks;
    std::vector<int> bucketOf, slotOf;   // per parameter: its bucket and its entry there
    std::vector<Bucket> buckets;
    size_t next = 0;                     // the next bucket to launch (strictly in order)
    bool active = false;
    std::mutex mutex;
    Stats stats;

    bool on() const { return comm && comm->worldSize() > 1; }

    void launchReadyInOrder(bool inBackward) {
        while (next < buckets.size() && buckets[next].ready == int(buckets[next].params.size())) {
            buckets[next].pending = comm->allReduceAsync(buckets[next].flat);
            ++(inBackward ? stats.launchedInBackward : stats.launchedAfter);
            ++next;
        }
    }

    void onGrad(int i, const torch::Tensor& g) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!active) return;
        Bucket& b = buckets[size_t(bucketOf[size_t(i)])];
        const int slot = slotOf[size_t(i)];
        if (b.got[size_t(slot)]) return;   // one gradient per step reaches a leaf's hook
        const torch::Tensor& p = params[size_t(i)];
        b.flat.narrow(0, b.offsets[size_t(slot)], p.numel()).copy_(g.detach().reshape(-1));
        b.got[size_t(slot)] = true;
        ++b.ready;
        launchReadyInOrder(true);
    }
};

GradientReducer::GradientReducer(Communicator* comm, std::vector<torch::Tensor> params, int64_t bucketBytes)
    : d(std::make_unique<Impl>()) {
    d->comm = comm;
    // Each tensor once (modules may share one), only those that train.
    std::vector<torch::Tensor> unique;
    for (auto& p : params) {
        if (!p.requires_grad()) continue;
        const bool seen = std::any_of(unique.begin(), unique.end(),
                                      [&](const torch::Tensor& q) { return q.unsafeGetTensorImpl() == p.unsafeGetTensorImpl(); });
        if (!seen) unique.push_back(p);
    }
    d->params = std::move(unique);
    const int n = int(d->params.size());
    d->bucketOf.assign(size_t(n), -1);
    d->slotOf.assign(size_t(n), -1);
    // Reverse registration order: backward produces the last layers' gradients first.
    int64_t filled = 0;
    for (int i = n - 1; i >= 0; --i) {
        const torch::Tensor& p = d->params[size_t(i)];
        const int64_t bytes = p.numel() * int64_t(p.element_size());
        const bool fresh = d->buckets.empty() || filled + bytes > bucketBytes ||
                           d->buckets.back().flat.scalar_type() != p.scalar_type() ||
                           d->buckets.back().flat.device() != p.device();
        if (fresh) {
            d->buckets.emplace_back();
            d->buckets.back().flat = torch::empty({0}, p.options().requires_grad(false));
            filled = 0;
        }
        Impl::Bucket& b = d->buckets.back();
        d->bucketOf[size_t(i)] = int(d->buckets.size()) - 1;
        d->slotOf[size_t(i)] = int(b.params.size());
        b.params.push_back(i);
        b.offsets.push_back(filled / int64_t(p.element_size()));
        filled += bytes;
        b.flat = torch::empty({filled / int64_t(p.element_size())}, b.flat.options());
    }
    for (auto& b : d->buckets) b.got.assign(b.params.size(), false);
    d->stats.buckets = int(d->buckets.size());
    for (const auto& p : d->params) d->stats.bytesPerStep += p.numel() * int64_t(p.element_size());
    if (!d->on()) return;
    Impl* impl = d.get();
    for (int i = 0; i < n; ++i)
        d->hooks.push_back(d->params[size_t(i)].register_hook([impl, i](torch::Tensor g) { impl->onGrad(i, g); }));
}

GradientReducer::~GradientReducer() {
    for (size_t i = 0; i < d->hooks.size(); ++i) {
        try {
            d->params[i].remove_hook(d->hooks[i]);
        } catch (...) {
        }
    }
}

void GradientReducer::beginStep() {
    if (!d->on()) return;
    std::lock_guard<std::mutex> lock(d->mutex);
    for (auto& b : d->buckets) {
        std::fill(b.got.begin(), b.got.end(), false);
        b.ready = 0;
        b.pending.reset();
    }
    d->next = 0;
    d->active = true;
}

void GradientReducer::finishStep() {
    if (!d->on()) return;
    std::unique_lock<std::mutex> lock(d->mutex);
    if (!d->active) throw Error("GradientReducer::finishStep without beginStep");
    // Which parameters got a gradient here; summed over the ranks below, so a parameter that
    // no rank's batch reached keeps its .grad() untouched (as in a single process), not zeros.
    torch::Tensor used = torch::zeros({int64_t(d->params.size())}, torch::kFloat32);
    {
        auto u = used.accessor<float, 1>();
        for (const auto& b : d->buckets)
            for (size_t s = 0; s < b.params.size(); ++s)
                if (b.got[s]) u[b.params[s]] = 1.0f;
    }
    // Parameters this rank's batch did not reach: zeros (their share of the average).
    for (size_t k = d->next; k < d->buckets.size(); ++k) {
        Impl::Bucket& b = d->buckets[k];
        for (size_t s = 0; s < b.params.size(); ++s)
            if (!b.got[s]) {
                b.flat.narrow(0, b.offsets[s], d->params[size_t(b.params[s])].numel()).zero_();
                b.got[s] = true;
                ++b.ready;
            }
    }
    d->launchReadyInOrder(false);
    d->active = false;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    auto usedPending = d->comm->allReduceAsync(used);
    for (auto& b : d->buckets)
        if (b.pending) d->comm->wait(*b.pending);
    d->comm->wait(*usedPending);
    d->stats.waitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double world = double(d->comm->worldSize());
    torch::NoGradGuard noGrad;
    for (auto& b : d->buckets) {
        b.flat.div_(world);
        for (size_t s = 0; s < b.params.size(); ++s) {
            if (used[b.params[s]].item<float>() == 0.0f) continue;   // no rank used it
            torch::Tensor& p = d->params[size_t(b.params[s])];
            const torch::Tensor avg = b.flat.narrow(0, b.offsets[s], p.numel()).view(p.sizes());
            if (p.grad().defined())
                p.mutable_grad().copy_(avg);
            else
                p.mutable_grad() = avg.clone();
        }
    }
    ++d->stats.steps;
}

GradientReducer::Stats GradientReducer::stats() const { return d->stats; }

std::vector<std::vector<int>> GradientReducer::bucketIndices() const {
    std::vector<std::vector<int>> out;
    for (const auto& b : d->buckets) out.push_back(b.params);
    return out;
}

// ---- trainer helpers ------------------------------------------------------------------------

void broadcastModule(Communicator* comm, torch::nn::Module& module) {
    if (!comm || comm->worldSize() < 2) return;
    torch::NoGradGuard ng;
    std::vector<torch::Tensor> ts;
    for (const auto& p : module.parameters()) ts.push_back(p.detach());
    comm->broadcast(ts, 0);
    broadcastBuffers(comm, module);
}

void broadcastBuffers(Communicator* comm, torch::nn::Module& module) {
    if (!comm || comm->worldSize() < 2) return;
    torch::NoGradGuard ng;
    // Floating-point buffers together, others (counters) one at a time.
    std::vector<torch::Tensor> floats;
    for (const auto& b : module.buffers()) {
        if (b.scalar_type() == torch::kFloat32) {
            floats.push_back(b.detach());
        } else {
            std::vector<torch::Tensor> one{b.detach()};
            comm->broadcast(one, 0);
        }
    }
    comm->broadcast(floats, 0);
}

bool anyRankStops(Communicator* comm, bool stopHere) {
    if (!comm || comm->worldSize() < 2) return stopHere;
    std::vector<torch::Tensor> t{torch::tensor({stopHere ? 1.0 : 0.0}, torch::kFloat64)};
    comm->allReduce(t);
    return t[0].item<double>() > 0;
}

std::vector<std::string> seriesNames(int worldSize) {
    std::vector<std::string> names;
    if (worldSize < 2) return names;
    names.push_back("dist/world_size");
    for (int r = 0; r < worldSize; ++r) names.push_back("dist/throughput_rank" + std::to_string(r));
    return names;
}

std::map<std::string, double> stepSeries(Communicator* comm, double imagesPerSecond) {
    std::map<std::string, double> m;
    if (!comm || comm->worldSize() < 2) return m;
    const auto perRank = comm->allGather(imagesPerSecond);
    for (size_t r = 0; r < perRank.size(); ++r) m["dist/throughput_rank" + std::to_string(r)] = perRank[r];
    m["dist/world_size"] = comm->worldSize();
    return m;
}

} // namespace glimpse::dist
