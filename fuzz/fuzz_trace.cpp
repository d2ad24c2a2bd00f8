// Fuzz target: traces (Trace::load, then the family's typed trace and a few of its views, which
// read only what the file holds: LetrTrace, CoatTrace, ConstellationTrace).
#include <torch/torch.h>

#include "core/models/coat/trace.h"
#include "core/models/constellation/trace.h"
#include "core/models/letr/trace.h"
#include "core/trace.h"
#include "fuzz/fuzz_util.h"

using namespace glimpse;

namespace {
void letrViews(Trace t) {
    letr::LetrTrace lt(std::move(t));
    const letr::Stage s = lt.lastStage();
    (void)lt.lines(s, lt.lastLayer(), 0.1f);
    (void)lt.image();
    (void)lt.attention(s, 0, 0, 0);
    (void)lt.selfAttention(letr::Stage::Coarse, 0, 0, 0);
}

void coatViews(Trace t) {
    coat::CoatTrace ct(std::move(t));
    (void)ct.top5();
    (void)ct.effectiveAttention(0, 0, 0, 0);
    (void)ct.clsAttention(ct.numBlocks() - 1, 0);
    if (ct.hasCrpe()) (void)ct.crpeWindow(0, 0, 0, 0);
    if (ct.numCams() > 0) (void)ct.cam(0);
    (void)ct.image();
}

void constellationViews(Trace t) {
    constellation::ConstellationTrace ct(std::move(t));
    (void)ct.top5();
    (void)ct.image();
    for (int m = 0; m < ct.numModules(); ++m) {
        (void)ct.assignment(m);
        (void)ct.topClusters(m, 0, 0);
        if (ct.module(m).relation) (void)ct.relation(m, -1, 0, 0);
    }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::tempPath("trace.h5");
    fuzz::writeFile(path, data, size);
    fuzz::expectClearError([&] {
        Trace t = Trace::load(path);
        const std::string family = t.family();
        if (family == "letr") letrViews(std::move(t));
        else if (family == "coat") coatViews(std::move(t));
        else if (family == "constellation") constellationViews(std::move(t));
    });
    return 0;
}
