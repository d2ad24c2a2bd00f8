#pragma once
// Data-parallel training on c10d (docs/distributed.md): the launcher's settings, a process
// group (Gloo over TCP on CPU), and a bucketed gradient all-reduce that overlaps the backward
// pass. No Qt; LibTorch's c10d does the communication.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace torch::nn {
class Module;
}

namespace glimpse::dist {

// Where a process stands in a distributed run. worldSize 1 is a plain single-process run.
struct Settings {
    std::string masterAddr = "127.0.0.1";
    int masterPort = 29500;
    int worldSize = 1;
    int rank = 0;
    int localRank = 0;
    // How long a collective (or the rendezvous) may wait for the other ranks before this rank
    // stops with an error naming the operation (a rank that died, a network cut).
    std::chrono::milliseconds timeout{std::chrono::seconds(120)};
    std::string backend = "gloo";

    bool distributed() const { return worldSize > 1; }
    // "rank 1 of 2 (gloo, 127.0.0.1:29500)"
    std::string describe() const;
};

// The launcher's environment, as torchrun sets it: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK,
// LOCAL_RANK (and GLIMPSE_DIST_TIMEOUT in seconds). Missing WORLD_SIZE: a single process.
// `overrides` (from command-line flags: "master-addr", "master-port", "world-size", "rank",
// "local-rank", "dist-timeout") take precedence. Throws glimpse::Error naming the variable or
// flag for a malformed value ("WORLD_SIZE=two is not a whole number"), a rank outside
// 0..WORLD_SIZE-1, a port outside 1..65535, or a distributed run without MASTER_ADDR/PORT.
Settings settingsFromEnvironment(const std::map<std::string, std::string>& overrides = {});

// A process group of all ranks (c10d ProcessGroupGloo over a TCPStore served by rank 0).
// Every collective is blocking for the caller and fails with glimpse::Error (naming the
// operation, this rank and the timeout) when another rank does not take part in time.
class Communicator {
public:
    // Rendezvous with the other ranks; throws glimpse::Error when they do not all arrive
    // within the timeout.
    explicit Communicator(const Settings& settings);
    ~Communicator();
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    int rank() const;
    int worldSize() const;
    const Settings& settings() const;

    // Element-wise sum over the ranks, in place (tensors of one dtype, the same shapes on every
    // rank; they travel as one flat buffer), then divided by the world size when `average`.
    void allReduce(std::vector<torch::Tensor>& tensors, bool average = false);
    // Rank `root`'s values into every rank's tensors, in place.
    void broadcast(std::vector<torch::Tensor>& tensors, int root = 0);
    // Every rank's `value` (a double each), in rank order.
    std::vector<double> allGather(double value);
    // Every rank's byte string (any length, uint8 1-D) to rank `root`, in rank order; other
    // ranks get an empty vector. Two collectives: the lengths, then the padded payloads.
    std::vector<torch::Tensor> gatherBytes(const torch::Tensor& bytes, int root = 0);
    void barrier();

    // Asynchronous all-reduce (sum) of one flat tensor, for the gradient reducer.
    struct Pending;
    std::shared_ptr<Pending> allReduceAsync(torch::Tensor flat);
    void wait(Pending& pending);

    // Bytes this rank sent into all-reduces and broadcasts so far (payload, not protocol).
    int64_t bytesReduced() const;

private:
    struct Impl;
    std::unique_ptr<Impl> d;
};

// Averages the gradients of `params` over all ranks, bucketed and overlapped with the backward
// pass: each parameter's gradient hook copies it into its bucket's flat buffer, and a bucket's
// all-reduce starts as soon as its last gradient is in, while autograd computes the rest.
// Buckets hold parameters in reverse registration order (the order backward produces them) up
// to `bucketBytes`, and are launched strictly in order, so every rank issues the same
// collectives in the same order. Usage per step:
//     optimizer.zero_grad(); reducer.beginStep(); loss.backward(); reducer.finishStep();
//     optimizer.step();
// finishStep() launches any bucket still waiting (a parameter this rank's batch did not reach
// counts as zeros), waits for all, and writes the averaged gradient into every parameter's
// .grad(), except for parameters no rank reached this step (found by one more small
// all-reduce): those keep their .grad() as a single process would. With a single process it
// does nothing.
class GradientReducer {
public:
    GradientReducer(Communicator* comm, std::vector<torch::Tensor> params, int64_t bucketBytes = 4 << 20);
    ~GradientReducer();
    GradientReducer(const GradientReducer&) = delete;
    GradientReducer& operator=(const GradientReducer&) = delete;

    void beginStep();
    void finishStep();

    struct Stats {
        int buckets = 0;
        int64_t bytesPerStep = 0;        // gradient bytes all-reduced per step
        int64_t steps = 0;
        int64_t launchedInBackward = 0;  // buckets whose all-reduce started during backward
        int64_t launchedAfter = 0;       // buckets started by finishStep()
        double waitSeconds = 0;          // time finishStep() waited for communication
    };
    Stats stats() const;
    // The buckets, as indices into `params` (for tests and the docs' volume figures).
    std::vector<std::vector<int>> bucketIndices() const;

private:
    struct Impl;
    std::unique_ptr<Impl> d;
};

// What every data-parallel trainer does the same way (a null `comm`: a single process, where
// each is a no-op or the local value).
// Rank 0's parameters and buffers into every rank's `module`.
void broadcastModule(Communicator* comm, torch::nn::Module& module);
// Rank 0's buffers only (batch-norm running statistics, after each step).
void broadcastBuffers(Communicator* comm, torch::nn::Module& module);
// Whether any rank asks to stop (each rank passes its own request; all then stop together).
bool anyRankStops(Communicator* comm, bool stopHere);
// The run-log series of a run of `worldSize` ranks: dist/world_size and dist/throughput_rank<r>
// (none for one process), and their values this step from each rank's `imagesPerSecond`.
std::vector<std::string> seriesNames(int worldSize);
std::map<std::string, double> stepSeries(Communicator* comm, double imagesPerSecond);

} // namespace glimpse::dist
