#include "core/models/xtra/finetune.h"

#include <torch/torch.h>

#include <set>

#include "core/dist/dist.h"
#include "core/error.h"
#include "core/models/efficientzero/loss.h"
#include "core/models/efficientzero/model.h"
#include "core/rl/env.h"
#include "core/rl/shared_space.h"
#include "core/train/state.h"

namespace glimpse::xtra {

using torch::Tensor;

FinetuneConfig FinetuneConfig::fromJson(const nlohmann::json& j, const std::string& source) {
    if (!j.is_object()) throw Error(source + ": xtra config: expected a JSON object");
    FinetuneConfig c;
    nlohmann::json ez = j;
    ez.erase("xtra");
    try {
        c.ez = efficientzero::TrainConfig::fromJson(ez);
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
    if (j.contains("xtra")) {
        const auto& x = j.at("xtra");
        const std::string where = source + ": xtra config: 'xtra'";
        if (!x.is_object()) throw Error(where + " must be an object");
        for (auto it = x.begin(); it != x.end(); ++it)
            if (it.key() != "sources" && it.key() != "weights" && it.key() != "task_weights" && it.key() != "offline_batch_size")
                throw Error(where + ": unknown key '" + it.key() + "'");
        if (x.contains("sources")) c.sources = sourcesFromJson(x.at("sources"), where);
        if (x.contains("weights")) {
            if (!x.at("weights").is_string()) throw Error(where + ".weights must be \"adaptive\" or \"constant\"");
            c.weights = x.at("weights").get<std::string>();
        }
        if (x.contains("task_weights")) c.taskWeights = TaskWeightConfig::fromJson(x.at("task_weights"), source);
        if (x.contains("offline_batch_size")) {
            if (!x.at("offline_batch_size").is_number_integer()) throw Error(where + ".offline_batch_size must be an integer");
            c.offlineBatchSize = x.at("offline_batch_size").get<int>();
        }
    }
    try {
        c.validate();
    } catch (const Error& e) {
        throw Error(source + ": " + e.what());
    }
    return c;
}

nlohmann::json FinetuneConfig::toJson() const {
    nlohmann::json j = ez.toJson();
    j["xtra"] = {{"sources", sourcesToJson(sources)}, {"weights", weights}, {"task_weights", taskWeights.toJson()},
                 {"offline_batch_size", offlineBatchSize}};
    return j;
}

void FinetuneConfig::validate() const {
    ez.validate();
    if (!rl::isSharedName(ez.env))
        throw Error("xtra config: XTRA finetunes in the shared space: the env must be shared:GAME, got '" + ez.env + "'");
    if (weights != "adaptive" && weights != "constant")
        throw Error("xtra config: xtra.weights must be \"adaptive\" or \"constant\", got '" + weights + "'");
    taskWeights.validate();
    if (offlineBatchSize < 1 || offlineBatchSize > 65536) throw Error("xtra config: xtra.offline_batch_size must be in 1..65536");
    if (sources.size() > 64) throw Error("xtra config: at most 64 offline tasks");
}

namespace {

// The offline tasks' part of eq. 5.1 at every learner update.
class ConcurrentTasks final : public efficientzero::ExtraObjective {
public:
    ConcurrentTasks(const FinetuneConfig& cfg, std::vector<std::unique_ptr<OfflineTask>> tasks)
        : cfg_(cfg), tasks_(std::move(tasks)), weights_(int(tasks_.size()), cfg.taskWeights) {}

    std::vector<std::string> series() const override {
        std::vector<std::string> s{"loss_offline"};
        for (const auto& t : tasks_)
            for (const char* k : {"task_weight/", "task_loss/", "task_similarity/"}) s.push_back(k + t->game());
        return s;
    }

    nlohmann::json describe() const override {
        nlohmann::json games = nlohmann::json::array(), categories = nlohmann::json::object();
        for (const auto& t : tasks_) {
            games.push_back(t->game());
            categories[t->game()] = gameCategory(t->game());
        }
        const std::string target = rl::baseGameName(cfg_.ez.env), targetCategory = gameCategory(target);
        return {{"trainer", "xtra"},
                {"xtra", cfg_.toJson().at("xtra")},
                {"offline_games", games},
                {"game_categories", categories},
                {"target_game", target},
                {"target_category", targetCategory}};
    }

    Tensor loss(efficientzero::Network& net, const Tensor& targetLoss, int64_t update,
                std::map<std::string, double>& metrics) override {
        const int m = int(tasks_.size());
        std::vector<Tensor> losses;
        for (int i = 0; i < m; ++i) {
            const auto batch = tasks_[size_t(i)]->sample(cfg_.offlineBatchSize, train::mixSeed(cfg_.ez.seed, uint64_t(update), 1000 + uint64_t(i)));
            losses.push_back(efficientzero::computeLoss(net, batch).total);
        }
        // The weights in force at this update (a window's last update sets the next ones).
        std::vector<double> eta(size_t(m), 1.0);
        if (cfg_.weights == "adaptive") {
            eta = weights_.weights();
            if (weights_.measuring(update)) {
                const auto sims = taskSimilarities(targetLoss, losses, net.parameters());
                weights_.observe(update, sims);
                for (int i = 0; i < m; ++i) metrics["task_similarity/" + tasks_[size_t(i)]->game()] = sims[size_t(i)];
            }
        }
        Tensor total = torch::zeros({});
        for (int i = 0; i < m; ++i) {
            total = total + eta[size_t(i)] * losses[size_t(i)];
            metrics["task_weight/" + tasks_[size_t(i)]->game()] = eta[size_t(i)];
            metrics["task_loss/" + tasks_[size_t(i)]->game()] = losses[size_t(i)].item<double>();
        }
        metrics["loss_offline"] = total.item<double>();
        return total;
    }

    std::vector<std::string> taskNames() const override {
        std::vector<std::string> n;
        for (const auto& t : tasks_) n.push_back(t->game());
        return n;
    }
    std::vector<std::string> taskCategories() const override {
        std::vector<std::string> c;
        for (const auto& t : tasks_) c.push_back(gameCategory(t->game()));
        return c;
    }
    // What the next update's loss() uses: the adaptive weights, or 1.
    std::vector<float> taskWeightsNow() const override {
        std::vector<float> w(tasks_.size(), 1.f);
        if (cfg_.weights == "adaptive")
            for (size_t i = 0; i < w.size(); ++i) w[i] = float(weights_.weights()[i]);
        return w;
    }

    nlohmann::json state() const override { return weights_.state(); }
    void restore(const nlohmann::json& state, const std::string& source) override { weights_.restore(state, source); }

private:
    const FinetuneConfig& cfg_;
    std::vector<std::unique_ptr<OfflineTask>> tasks_;
    TaskWeights weights_;
};

} // namespace

efficientzero::TrainResult finetune(const FinetuneConfig& cfg, const std::string& runDir, train::Control* control,
                                    const train::ProgressFn& progress, dist::Communicator* comm) {
    cfg.validate();
    const std::string target = rl::baseGameName(cfg.ez.env);
    const bool learner = !comm || comm->rank() == 0;
    std::unique_ptr<ConcurrentTasks> extra;
    if (learner && !cfg.sources.empty()) {
        const auto env = rl::makeEnv(cfg.ez.env);
        const auto net = efficientzero::cpuNetwork(*env, cfg.ez.network);
        TargetOptions to;
        to.unroll = cfg.ez.unroll;
        to.tdSteps = cfg.ez.tdSteps;
        to.discount = cfg.ez.discount;
        to.clipRewards = cfg.ez.clipRewards;
        to.stack = net.stack;
        std::vector<std::unique_ptr<OfflineTask>> tasks;
        std::set<std::string> seen;
        for (const auto& s : cfg.sources) {
            tasks.push_back(std::make_unique<OfflineTask>(s, to, progress));
            const std::string g = tasks.back()->game();
            if (g == target)
                throw Error(s.dataset + ": the target game '" + target + "' is listed among the offline tasks; XTRA's offline tasks are other games");
            if (!seen.insert(g).second) throw Error(s.dataset + ": a second dataset of '" + g + "'; one per game");
        }
        extra = std::make_unique<ConcurrentTasks>(cfg, std::move(tasks));
    }
    return efficientzero::trainAgent(cfg.ez, runDir, control, progress, comm, extra.get());
}

} // namespace glimpse::xtra
