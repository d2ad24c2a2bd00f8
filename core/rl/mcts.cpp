#include "core/rl/mcts.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace glimpse::rl {

void MinMaxStats::update(double v) {
    minimum = std::min(minimum, v);
    maximum = std::max(maximum, v);
}

void MinMaxStats::clear() {
    minimum = std::numeric_limits<double>::infinity();
    maximum = -std::numeric_limits<double>::infinity();
}

double MinMaxStats::normalize(double v) const {
    const double delta = maximum - minimum;
    if (!(delta > 0)) return v;   // nothing seen, or one value: unchanged (as the reference)
    return (v - minimum) / std::max(delta, floor);
}

double puctPrior(const MctsConfig& c, int parentVisits, int childVisits, double prior) {
    const double pbC = std::log((parentVisits + c.pbCBase + 1.0) / c.pbCBase) + c.pbCInit;
    return pbC * std::sqrt(double(parentVisits)) / (childVisits + 1.0) * prior;
}

Mcts::Mcts(const MctsConfig& config, uint64_t seed) : config_(config), rng_(seed) {
    if (config.numSimulations < 1)
        throw Error("mcts: numSimulations must be >= 1, got " + std::to_string(config.numSimulations));
    if (config.lstmHorizon < 1) throw Error("mcts: lstmHorizon must be >= 1, got " + std::to_string(config.lstmHorizon));
}

double Mcts::childQ(const Node& parent, const Node& child) const {
    const double reward = parent.resetHidden ? child.valuePrefix : child.valuePrefix - parent.valuePrefix;
    return reward + config_.discount * child.value();
}

double Mcts::meanQ(const std::vector<Node>& tree, const Node& node, bool isRoot, double parentQ) const {
    double total = 0;
    int visited = 0;
    for (int a = 0; a < node.numChildren; ++a) {
        const Node& child = tree[size_t(node.firstChild + a)];
        if (child.visits == 0) continue;
        total += childQ(node, child);
        ++visited;
    }
    if (isRoot && visited > 0) return total / visited;
    return (parentQ + total) / (visited + 1);
}

double Mcts::ucbScore(const Node& parent, const Node& child, const MinMaxStats& stats, double parentMeanQ) const {
    const double q = child.visits == 0 ? parentMeanQ : childQ(parent, child);
    return puctPrior(config_, parent.childVisits, child.visits, child.prior) + std::clamp(stats.normalize(q), 0.0, 1.0);
}

int Mcts::selectChild(const std::vector<Node>& tree, const Node& node, const MinMaxStats& stats, double mq,
                      const std::vector<int>& legal) {
    std::vector<int> actions = legal;
    if (actions.empty())
        for (int a = 0; a < node.numChildren; ++a) actions.push_back(a);
    // The reference's tie rule, in action order: a higher score starts the list afresh, a score
    // within tieEpsilon below the best so far joins it; one of the list is chosen uniformly.
    double best = -std::numeric_limits<double>::infinity();
    std::vector<int> ties;
    for (int a : actions) {
        const double score = ucbScore(node, tree[size_t(node.firstChild + a)], stats, mq);
        if (score > best) {
            best = score;
            ties.assign(1, a);
        } else if (score >= best - config_.tieEpsilon) {
            ties.push_back(a);
        }
    }
    if (ties.empty()) throw Error("mcts: no finite pUCT score (the model returned non-finite values)");
    return ties[size_t(rng_() % ties.size())];
}

void Mcts::expand(std::vector<Node>& tree, int index, const Prediction& p, const std::vector<int>& legal) {
    if (int(p.policyLogits.size()) != numActions_)
        throw Error("mcts: the model returned " + std::to_string(p.policyLogits.size()) + " policy logits, expected " +
                    std::to_string(numActions_));
    const int first = int(tree.size());
    tree.resize(tree.size() + size_t(numActions_));
    Node& node = tree[size_t(index)];
    node.firstChild = first;
    node.numChildren = numActions_;
    node.valuePrefix = p.valuePrefix;
    std::vector<int> actions = legal;
    if (actions.empty())
        for (int a = 0; a < numActions_; ++a) actions.push_back(a);
    float top = -std::numeric_limits<float>::infinity();
    for (int a : actions) top = std::max(top, p.policyLogits[size_t(a)]);
    double sum = 0;
    for (int a : actions) sum += std::exp(double(p.policyLogits[size_t(a)] - top));
    for (int a : actions) {
        Node& child = tree[size_t(first + a)];
        child.prior = float(std::exp(double(p.policyLogits[size_t(a)] - top)) / sum);
        child.depth = node.depth + 1;
        child.resetHidden = child.depth % config_.lstmHorizon == 0;
    }
}

namespace {

// Every action when `legal` is empty, else `legal`.
std::vector<int> actionsOrAll(const std::vector<int>& legal, int numActions) {
    std::vector<int> actions = legal;
    if (actions.empty())
        for (int a = 0; a < numActions; ++a) actions.push_back(a);
    return actions;
}

// Back up the leaf value along `path`: each node gets the discounted return from itself on.
void backUp(std::vector<Node>& tree, const std::vector<int>& path, double value, double discount) {
    double bootstrap = value;
    for (size_t i = path.size(); i-- > 0;) {
        Node& node = tree[size_t(path[i])];
        node.valueSum += bootstrap;
        ++node.visits;
        double reward = 0;
        if (i > 0) {
            Node& parent = tree[size_t(path[i - 1])];
            ++parent.childVisits;
            reward = parent.resetHidden ? node.valuePrefix : node.valuePrefix - parent.valuePrefix;
        }
        bootstrap = reward + discount * bootstrap;
    }
}

} // namespace

// The reference's update_tree_q (EfficientZero core/ctree/cnode.cpp), run after every back-up
// on cleared statistics: a depth-first walk over the expanded nodes with a stack (children
// pushed in action order, so the last action's subtree comes first); every node but the root
// adds reward + discount * value, its reward taken against the node walked just before it
// (its parent when it directly follows it, else the last node of the previous subtree: the
// reference does this, and matching it is the point; docs/rl.md "Search").
void rescanMinMax(const std::vector<Node>& tree, double discount, MinMaxStats& stats) {
    stats.clear();
    std::vector<int> stack{0};
    float previousPrefix = 0.f;
    bool previousReset = false;
    while (!stack.empty()) {
        const int index = stack.back();
        stack.pop_back();
        const Node& node = tree[size_t(index)];
        if (index != 0) {
            const double reward = previousReset ? node.valuePrefix : node.valuePrefix - previousPrefix;
            stats.update(reward + discount * node.value());
        }
        for (int a = 0; a < node.numChildren; ++a)
            if (tree[size_t(node.firstChild + a)].expanded()) stack.push_back(node.firstChild + a);
        previousPrefix = node.valuePrefix;
        previousReset = node.resetHidden;
    }
}

namespace {

// The completed-Q policy target (SearchResult::improvedPolicies) over the legal actions, from the
// root's logits and value and its children's visit counts and Q.
std::vector<float> completedQPolicy(const MctsConfig& config, const Prediction& root, const std::vector<int>& legal,
                                    const std::vector<int>& counts, const std::vector<float>& q, int total,
                                    const MinMaxStats& stats) {
    const auto& logits = root.policyLogits;
    double top = -1e300;
    for (int a : legal) top = std::max(top, double(logits[size_t(a)]));
    std::vector<double> prior(counts.size(), 0.0);
    double z = 0;
    for (int a : legal) z += prior[size_t(a)] = std::exp(double(logits[size_t(a)]) - top);
    for (int a : legal) prior[size_t(a)] /= z;
    double visitedPrior = 0, visitedQ = 0;
    int maxVisits = 0;
    for (int a : legal)
        if (counts[size_t(a)] > 0) {
            visitedPrior += prior[size_t(a)];
            visitedQ += prior[size_t(a)] * double(q[size_t(a)]);
            maxVisits = std::max(maxVisits, counts[size_t(a)]);
        }
    const double vMix = total > 0 && visitedPrior > 0
                            ? (double(root.value) + double(total) * visitedQ / visitedPrior) / (1.0 + total)
                            : double(root.value);
    const double sigma = (config.completedQVisits + maxVisits) * config.completedQScale;
    std::vector<double> improved(counts.size(), 0.0);
    double best = -1e300;
    for (int a : legal) {
        const double qa = counts[size_t(a)] > 0 ? double(q[size_t(a)]) : vMix;
        improved[size_t(a)] = double(logits[size_t(a)]) + sigma * std::clamp(stats.normalize(qa), 0.0, 1.0);
        best = std::max(best, improved[size_t(a)]);
    }
    double zi = 0;
    for (int a : legal) zi += improved[size_t(a)] = std::exp(improved[size_t(a)] - best);
    std::vector<float> improvedF(counts.size(), 0.f);
    for (int a : legal) improvedF[size_t(a)] = float(improved[size_t(a)] / zi);
    return improvedF;
}

} // namespace

void Mcts::checkSearchInput(const std::vector<Prediction>& roots, const std::vector<std::vector<int>>& legalActions) {
    if (roots.empty()) throw Error("mcts: search needs at least one root");
    if (!legalActions.empty() && legalActions.size() != roots.size())
        throw Error("mcts: got legal actions for " + std::to_string(legalActions.size()) + " trees, but " +
                    std::to_string(roots.size()) + " roots");
    numActions_ = int(roots.front().policyLogits.size());
    if (numActions_ < 1) throw Error("mcts: the root prediction has no policy logits");
    for (size_t b = 0; b < legalActions.size(); ++b)
        for (int a : legalActions[b])
            if (a < 0 || a >= numActions_)
                throw Error("mcts: legal action " + std::to_string(a) + " of tree " + std::to_string(b) +
                            " is outside [0, " + std::to_string(numActions_) + ")");
}

void Mcts::startTree(int b, const Prediction& root, const std::vector<int>& legal, bool addNoise) {
    auto& tree = trees_[size_t(b)];
    tree.reserve(size_t(config_.numSimulations + 1) * size_t(numActions_) + 1);
    tree.emplace_back();
    tree[0].state = {0, b};
    expand(tree, 0, root, legal);
    tree[0].valuePrefix = 0.f;  // the root starts the prefix
    tree[0].visits = 1;         // as the reference's root: its value is value_sum / (N + 1)
    if (!addNoise) return;
    const std::vector<int> actions = actionsOrAll(legal, numActions_);
    std::gamma_distribution<double> gamma(config_.dirichletAlpha, 1.0);
    std::vector<double> noise;
    double total = 0;
    for (size_t i = 0; i < actions.size(); ++i) total += noise.emplace_back(gamma(rng_));
    for (size_t i = 0; i < actions.size(); ++i) {
        Node& child = tree[size_t(tree[0].firstChild + actions[i])];
        const double eta = total > 0 ? noise[i] / total : 1.0 / double(actions.size());
        child.prior = float(child.prior * (1 - config_.explorationFraction) + eta * config_.explorationFraction);
    }
}

int Mcts::selectLeaf(const std::vector<Node>& tree, const MinMaxStats& stats, const std::vector<int>& rootLegal,
                     std::vector<int>& path) {
    static const std::vector<int> none;  // below the root every action is legal
    path.assign(1, 0);
    double parentQ = 0;
    int action = 0;
    for (bool isRoot = true; tree[size_t(path.back())].expanded(); isRoot = false) {
        const Node& node = tree[size_t(path.back())];
        const double mq = meanQ(tree, node, isRoot, parentQ);
        parentQ = mq;
        action = selectChild(tree, node, stats, mq, isRoot ? rootLegal : none);
        path.push_back(node.firstChild + action);
    }
    return action;
}

void Mcts::addRootResult(int b, const Prediction& root, const std::vector<int>& legal, const MinMaxStats& stats,
                         SearchResult& result) const {
    const auto& tree = trees_[size_t(b)];
    std::vector<int> counts(static_cast<size_t>(numActions_));
    std::vector<float> priors(counts.size()), policy(counts.size()),
        q(counts.size(), -std::numeric_limits<float>::infinity());
    int total = 0;
    for (int a = 0; a < numActions_; ++a) {
        const Node& child = tree[size_t(tree[0].firstChild + a)];
        counts[size_t(a)] = child.visits;
        if (child.visits > 0) q[size_t(a)] = float(childQ(tree[0], child));
        priors[size_t(a)] = tree[size_t(tree[0].firstChild + a)].prior;
        total += counts[size_t(a)];
    }
    for (int a = 0; a < numActions_; ++a) policy[size_t(a)] = total > 0 ? float(counts[size_t(a)]) / float(total) : 0.f;
    result.improvedPolicies.push_back(
        completedQPolicy(config_, root, actionsOrAll(legal, numActions_), counts, q, total, stats));
    result.visitCounts.push_back(std::move(counts));
    result.rootPriors.push_back(std::move(priors));
    result.rootQ.push_back(std::move(q));
    result.policies.push_back(std::move(policy));
    result.rootValues.push_back(float(tree[0].value()));
}

SearchResult Mcts::search(SearchModel& model, const std::vector<Prediction>& roots, bool addNoise,
                          const std::vector<std::vector<int>>& legalActions) {
    checkSearchInput(roots, legalActions);
    const int batch = int(roots.size());
    const std::vector<int> none;  // empty legal list: every action
    auto legalOf = [&](int b) -> const std::vector<int>& {
        return legalActions.empty() ? none : legalActions[size_t(b)];
    };
    trees_.assign(size_t(batch), {});
    std::vector<MinMaxStats> stats(static_cast<size_t>(batch));
    for (int b = 0; b < batch; ++b) {
        stats[size_t(b)].floor = config_.minMaxFloor;
        startTree(b, roots[size_t(b)], legalOf(b), addNoise);
    }
    std::vector<std::vector<int>> paths(static_cast<size_t>(batch));
    std::vector<StateRef> parents(static_cast<size_t>(batch));
    std::vector<int> actions(static_cast<size_t>(batch));
    std::vector<uint8_t> reset(static_cast<size_t>(batch));
    for (int sim = 1; sim <= config_.numSimulations; ++sim) {
        for (int b = 0; b < batch; ++b) {
            const auto& tree = trees_[size_t(b)];
            auto& path = paths[size_t(b)];
            actions[size_t(b)] = selectLeaf(tree, stats[size_t(b)], legalOf(b), path);
            const Node& parent = tree[size_t(path[path.size() - 2])];
            parents[size_t(b)] = parent.state;
            reset[size_t(b)] = parent.resetHidden ? 1 : 0;
        }
        const std::vector<Prediction> out = model.recurrent(parents, actions, reset);
        if (int(out.size()) != batch)
            throw Error("mcts: the model returned " + std::to_string(out.size()) + " predictions for " +
                        std::to_string(batch) + " trees");
        for (int b = 0; b < batch; ++b) {
            auto& tree = trees_[size_t(b)];
            const int leaf = paths[size_t(b)].back();
            tree[size_t(leaf)].state = {sim, b};
            expand(tree, leaf, out[size_t(b)], {});
            backUp(tree, paths[size_t(b)], out[size_t(b)].value, config_.discount);
            rescanMinMax(tree, config_.discount, stats[size_t(b)]);
        }
    }
    SearchResult result;
    for (int b = 0; b < batch; ++b) addRootResult(b, roots[size_t(b)], legalOf(b), stats[size_t(b)], result);
    return result;
}

int selectAction(const std::vector<int>& visitCounts, double temperature, std::mt19937_64& rng,
                 const std::vector<float>& tieScores) {
    if (visitCounts.empty()) throw Error("mcts: selectAction got no visit counts");
    if (!tieScores.empty() && tieScores.size() != visitCounts.size())
        throw Error("mcts: selectAction got " + std::to_string(tieScores.size()) + " tie scores for " +
                    std::to_string(visitCounts.size()) + " actions");
    if (temperature <= 0) {
        const int most = *std::max_element(visitCounts.begin(), visitCounts.end());
        std::vector<int> ties;
        for (size_t a = 0; a < visitCounts.size(); ++a)
            if (visitCounts[a] == most) ties.push_back(int(a));
        if (!tieScores.empty()) {
            float best = -std::numeric_limits<float>::infinity();
            for (int a : ties) best = std::max(best, tieScores[size_t(a)]);
            std::vector<int> top;
            for (int a : ties)
                if (tieScores[size_t(a)] >= best) top.push_back(a);
            if (!top.empty()) ties = std::move(top);
        }
        if (ties.size() == 1) return ties.front();
        return ties[size_t(std::uniform_int_distribution<size_t>(0, ties.size() - 1)(rng))];
    }
    std::vector<double> weights;
    for (int n : visitCounts) weights.push_back(std::pow(double(n), 1.0 / temperature));
    if (std::all_of(weights.begin(), weights.end(), [](double w) { return w <= 0; }))
        throw Error("mcts: selectAction got all-zero visit counts");
    std::discrete_distribution<int> pick(weights.begin(), weights.end());
    return pick(rng);
}

double visitTemperature(double progress) {
    if (progress < 0.5) return 1.0;
    if (progress < 0.75) return 0.5;
    return 0.25;
}

} // namespace glimpse::rl
