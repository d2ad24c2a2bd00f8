#include "core/util/threads.h"

#include <dlfcn.h>

#include <torch/torch.h>

namespace glimpse {

bool setBlasThreads(int threads) {
    // Looked up at run time: libblas.so.3 is whichever BLAS Debian's alternatives select.
    using SetThreads = void (*)(int);
    auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    if (!set) return false;
    set(threads);
    return true;
}

void setComputeThreads(int threads) {
    torch::set_num_threads(threads);
    setBlasThreads(threads);
}

} // namespace glimpse
