// The registry of model families: one line per family.
#include "app/family.h"

#include "app/resources.h"
#include "core/error.h"

namespace glimpse::app {

ModelFamily letrFamily();           // app/letr/family.cpp
ModelFamily coatFamily();           // app/coat/family.cpp
ModelFamily efficientZeroFamily();  // app/efficientzero/family.cpp
ModelFamily constellationFamily();  // app/constellation/family.cpp
ModelFamily xtraFamily();           // app/xtra/family.cpp

const std::vector<ModelFamily>& modelFamilies() {
    static const std::vector<ModelFamily> all{letrFamily(), coatFamily(), efficientZeroFamily(),
                                              constellationFamily(), xtraFamily()};
    return all;
}

const ModelFamily* findFamily(const std::string& name) {
    for (const auto& f : modelFamilies())
        if (f.name == name) return &f;
    return nullptr;
}

QString defaultCheckpoint(const std::string& family) {
    const ModelFamily* f = findFamily(family);
    return f && !f->defaultCheckpoint.isEmpty() ? resourceFile(f->defaultCheckpoint) : QString();
}

namespace {

// The index of the first pattern of `list` that `series` matches ("prefix*" or a whole name), -1.
int matchIndex(const QStringList& list, const QString& series) {
    for (int i = 0; i < list.size(); ++i) {
        const QString& p = list[i];
        if (p.endsWith('*') ? series.startsWith(p.chopped(1)) : series == p) return i;
    }
    return -1;
}

} // namespace

ChartPlacement chartPlacement(const std::string& family, const QString& series) {
    // The order of the groups, the same for every family (issue 55): what a researcher looks at
    // first. System charts keep this order, then go by name.
    static const QStringList kTitles = {"Losses", "Validation metrics", "Task weights", "Optimizer and system"};
    static const QStringList kSystem = {"lr", "grad_norm", "throughput", "env_steps_per_s", "updates_per_s",
                                        "memory*", "beta", "epoch", "phase", "replay_size", "env_steps", "dist/*"};
    std::vector<const ModelFamily*> order;
    if (const ModelFamily* f = findFamily(family)) order.push_back(f);
    for (const auto& f : modelFamilies())
        if (f.name != family) order.push_back(&f);
    for (int g = 0; g < 3; ++g)
        for (const ModelFamily* f : order) {
            const QStringList& list = g == 0 ? f->training.losses : g == 1 ? f->training.metrics : f->training.tasks;
            const int i = matchIndex(list, series);
            if (i >= 0) return {g, kTitles[g], i};
        }
    const int i = matchIndex(kSystem, series);
    return {3, kTitles[3], i >= 0 ? i : int(kSystem.size())};
}

TrainingJob::Runner modelRunner() {
    return [](const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
        const ModelFamily* f = findFamily(spec.model.toStdString());
        if (!f || !f->trainer) throw Error("no trainer for the model family '" + spec.model.toStdString() + "'");
        f->trainer(spec, control, progress);
    };
}

} // namespace glimpse::app
