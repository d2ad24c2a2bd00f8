// Fuzz target: run logs (RunLog::load, and RunLogReader::open / refresh / every accessor).
#include <torch/torch.h>

#include "core/runlog.h"
#include "fuzz/fuzz_util.h"

using namespace glimpse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string path = fuzz::tempPath("run.h5");
    fuzz::writeFile(path, data, size);
    fuzz::expectClearError([&] { (void)RunLog::load(path); });
    fuzz::expectClearError([&] {
        RunLogReader r = RunLogReader::open(path);
        (void)r.refresh();
        for (const std::string& name : r.seriesNames()) {
            (void)r.rowCount(name);
            (void)r.series(name);
            (void)r.series(name, 1);
        }
        for (const std::string& name : r.evalNames()) (void)r.eval(name);
        (void)r.config();
        (void)r.status();
        (void)r.snapshot();
        (void)r.liveness(1e9);
    });
    return 0;
}
