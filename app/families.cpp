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

TrainingJob::Runner modelRunner() {
    return [](const TrainingSpec& spec, train::Control& control, const train::ProgressFn& progress) {
        const ModelFamily* f = findFamily(spec.model.toStdString());
        if (!f || !f->trainer) throw Error("no trainer for the model family '" + spec.model.toStdString() + "'");
        f->trainer(spec, control, progress);
    };
}

} // namespace glimpse::app
