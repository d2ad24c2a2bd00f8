#pragma once
// Batched Monte Carlo tree search in a learned model, EfficientZero style (docs/rl.md,
// MODELS.md "MCTS"): B trees searched in lockstep, one batched model call per simulation.
// pUCT with pb_c_base / pb_c_init, min-max normalized Q over value-prefix differences (the
// statistics re-scanned over the tree after every back-up, root excluded, as the official
// code does), LSTM state reset every `lstmHorizon` levels, Dirichlet noise at the roots when
// asked, the reference's tie-break within 1e-6 from a seeded RNG. No LibTorch here: the model is reached
// through SearchModel (core/models/efficientzero/search.h adapts the network).
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace glimpse::rl {

struct MctsConfig {
    int numSimulations = 50;
    double pbCBase = 19652.0;
    double pbCInit = 1.25;
    double discount = 0.997;         // per agent step; Atari with frame skip 4 uses 0.997^4
    double dirichletAlpha = 0.3;
    double explorationFraction = 0.25;
    int lstmHorizon = 5;             // value-prefix LSTM reset every this many levels
    double minMaxFloor = 0.01;       // smallest Q range used for normalization
    double tieEpsilon = 1e-6;
    // Completed-Q policy target (Gumbel MuZero, Danihelka et al. 2022): softmax(prior logits +
    // (completedQVisits + max visits) * completedQScale * normalized completed Q).
    double completedQVisits = 50.0;
    double completedQScale = 0.1;
};

// What the model predicts for one latent state.
struct Prediction {
    float valuePrefix = 0.f;           // predicted sum of rewards since the last LSTM reset
    float value = 0.f;
    std::vector<float> policyLogits;   // one per action
};

// Latent states stay inside the model; the search names them by (slot, row): slot 0 holds the
// B root states given to search(), slot k the states made by the k-th recurrent() call, row
// the tree index.
struct StateRef {
    int slot = 0, row = 0;
};

class SearchModel {
public:
    virtual ~SearchModel() = default;
    // One expansion per tree: the state reached from parents[b] by actions[b]. resetHidden[b]
    // says to start the value-prefix LSTM from zeros instead of the parent's LSTM state.
    virtual std::vector<Prediction> recurrent(const std::vector<StateRef>& parents, const std::vector<int>& actions,
                                              const std::vector<uint8_t>& resetHidden) = 0;
};

// Min and max of a tree's Q values. The search clears them after every back-up and re-scans
// the tree (rescanMinMax), as the reference does.
struct MinMaxStats {
    double minimum = std::numeric_limits<double>::infinity();
    double maximum = -std::numeric_limits<double>::infinity();
    double floor = 0.01;
    void update(double v);
    void clear();
    // (v - min) / max(max - min, floor) once max > min; v unchanged before (nothing seen, or
    // a single value), as the reference's CMinMaxStats. Not clipped.
    double normalize(double v) const;
};

// The pUCT exploration term: (log((N + base + 1) / base) + init) * sqrt(N) / (n + 1) * prior,
// with N the parent's total child visits and n the child's visits.
double puctPrior(const MctsConfig& config, int parentVisits, int childVisits, double prior);

struct Node {
    float prior = 0.f;
    int visits = 0;            // the root starts at 1 (the reference's root value is value_sum / (N + 1))
    int childVisits = 0;       // sum of the children's visits (N in the pUCT formula)
    double valueSum = 0;
    float valuePrefix = 0.f;
    bool resetHidden = false;  // this node's LSTM state is reset: its children's prefixes start afresh
    int depth = 0;
    int firstChild = -1;       // children: numChildren consecutive nodes; -1 until expanded
    int numChildren = 0;
    StateRef state;
    bool expanded() const { return firstChild >= 0; }
    double value() const { return visits > 0 ? valueSum / visits : 0.0; }
};

struct SearchResult {
    std::vector<std::vector<int>> visitCounts;  // [B][numActions], 0 for illegal actions
    std::vector<float> rootValues;              // [B] root value: backed-up values' sum / (N + 1)
    std::vector<std::vector<float>> policies;   // [B][numActions] visit distribution
    std::vector<std::vector<float>> rootPriors; // [B][numActions] after noise, if any
    std::vector<std::vector<float>> rootQ;      // [B][numActions] Q from the root, -inf if unvisited
    // [B][numActions] softmax(root logits + sigma(completed Q)) over the legal actions: the
    // network's prior (no noise) improved by the search's Q; unvisited actions take the mixed
    // value v_mix. Unlike the visit distribution it does not sharpen the prior when the Q values
    // carry no information (few simulations), so it does not collapse the policy.
    std::vector<std::vector<float>> improvedPolicies;
};

class Mcts {
public:
    explicit Mcts(const MctsConfig& config = {}, uint64_t seed = 0);
    const MctsConfig& config() const { return config_; }

    // roots[b]: the initial-inference prediction of tree b, whose state the model holds as
    // (slot 0, row b). legalActions: per tree (empty = all actions legal); interior nodes
    // consider all actions. Noise mixes Dirichlet(alpha) into the root priors.
    SearchResult search(SearchModel& model, const std::vector<Prediction>& roots, bool addNoise,
                        const std::vector<std::vector<int>>& legalActions = {});

    // The trees of the last search, for inspection: node 0 is the root.
    const std::vector<Node>& tree(int b) const { return trees_.at(size_t(b)); }
    // Q of a child from its parent's view: reward (prefix difference, or the prefix alone
    // when the parent's LSTM state was reset) + discount * child value.
    double childQ(const Node& parent, const Node& child) const;
    // pUCT score of one child (prior term + clipped normalized Q; unvisited children use
    // parentMeanQ).
    double ucbScore(const Node& parent, const Node& child, const MinMaxStats& stats, double parentMeanQ) const;

    // Mean Q of node's visited children (the value given to unvisited ones): at the root their
    // plain mean (parentQ if none is visited); below it, parentQ counts as one more sample.
    double meanQ(const std::vector<Node>& tree, const Node& node, bool isRoot, double parentQ) const;

private:
    // Errors for no roots, legal-action lists that do not match them; sets numActions_.
    void checkSearchInput(const std::vector<Prediction>& roots, const std::vector<std::vector<int>>& legalActions);
    // Tree b with its expanded root (and root noise when asked).
    void startTree(int b, const Prediction& root, const std::vector<int>& legal, bool addNoise);
    // Walks from the root down to an unexpanded child; `path` gets the node indices (root first)
    // and the action into the leaf is returned.
    int selectLeaf(const std::vector<Node>& tree, const MinMaxStats& stats, const std::vector<int>& rootLegal,
                   std::vector<int>& path);
    // Appends tree b's root statistics and policy targets to `result`.
    void addRootResult(int b, const Prediction& root, const std::vector<int>& legal, const MinMaxStats& stats,
                       SearchResult& result) const;
    int selectChild(const std::vector<Node>& tree, const Node& node, const MinMaxStats& stats, double meanQ,
                    const std::vector<int>& legal);
    void expand(std::vector<Node>& tree, int node, const Prediction& p, const std::vector<int>& legal);

    MctsConfig config_;
    std::mt19937_64 rng_;
    int numActions_ = 0;
    std::vector<std::vector<Node>> trees_;
};

// The reference's min-max statistics of `tree` after a back-up: cleared, then every expanded
// node but the root, in the reference's walk order (see mcts.cpp).
void rescanMinMax(const std::vector<Node>& tree, double discount, MinMaxStats& stats);

// Visit-count action selection: temperature 0 picks the most visited action; ties go to the
// highest `tieScores` entry (e.g. the search's root Q, SearchResult::rootQ) when given, and the
// remaining ties are broken uniformly with rng (never "lowest index": with few simulations the
// counts often tie, and index 0 is NOOP in every game). Otherwise samples with probability
// proportional to N^(1 / temperature).
int selectAction(const std::vector<int>& visitCounts, double temperature, std::mt19937_64& rng,
                 const std::vector<float>& tieScores = {});
// EfficientZero's schedule: 1 for the first half of training, 0.5 up to 75%, then 0.25.
double visitTemperature(double trainingProgress);

} // namespace glimpse::rl
