// Fuzz target: --data specifications (openLineDataset, openClassificationDataset,
// openFewShotDataset) and the first sample of what they open. The first byte picks the parser,
// the rest is the spec. Specs are resolved inside a small sandbox folder (fuzz/sandbox.h);
// absolute paths, '..' and the Debian Fashion-MNIST default (60000 images, slow) are skipped
// so the fuzzer neither wanders over the file system nor spends its time on one dataset.
#include <string>

#include <torch/torch.h>

#include "core/data/classification.h"
#include "core/data/fewshot.h"
#include "core/data/open.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/sandbox.h"

using namespace glimpse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const bool ready = (fuzz::makeSandbox(), true);
    (void)ready;
    if (size < 1) return 0;
    const int which = data[0] % 3;
    const std::string spec(reinterpret_cast<const char*>(data + 1), size - 1);
    if (spec.find('/') != std::string::npos || spec.find("..") != std::string::npos || spec == "fashion-mnist" ||
        spec.find('\0') != std::string::npos)
        return 0;
    fuzz::expectClearError(
        [&] {
            if (which == 0) {
                auto ds = data::openLineDataset(spec);
                if (ds->size() > 0) (void)ds->get(ds->size() - 1);
            } else if (which == 1) {
                auto s = data::openClassificationDataset(spec);
                if (s.train->size() > 0) (void)s.train->get(0);
                if (s.val && s.val->size() > 0) (void)s.val->get(s.val->size() - 1);
            } else {
                auto s = data::openFewShotDataset(spec);
                (void)s.describe();
                if (s.base->size() > 0) (void)s.base->get(s.base->size() - 1);
                if (s.novel->size() > 0) (void)s.novel->get(0);
            }
        },
        false);
    return 0;
}
