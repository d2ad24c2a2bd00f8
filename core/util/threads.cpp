#include "core/util/threads.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

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

void chooseBlasKernels(char** argv) {
    if (std::getenv("OPENBLAS_CORETYPE")) return;   // chosen already (by the user, or by us before the exec)
    using CoreName = char* (*)();
    auto corename = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    if (!corename || !corename() || std::strcmp(corename(), "Prescott") != 0) return;
    __builtin_cpu_init();
    const char* core = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : nullptr;
    if (!core) return;
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);   // returns only on failure: go on with Prescott's kernels
}

} // namespace glimpse
