#include "core/util/threads.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

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
    if (!corename || !corename()) return;
    const std::string chosen = corename();
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    // Prescott: a CPU OpenBLAS 0.3.21 does not know (Intel Sapphire Rapids). Haswell / Zen: an AMD
    // EPYC with AVX-512 (Zen 4), for which it picks its AVX2 kernels (float32 products 1.7x slower).
    const bool weak = chosen == "Prescott" || ((chosen == "Haswell" || chosen == "Zen") && avx512);
    if (!weak) return;
    const char* core = avx512 ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : nullptr;
    if (!core || chosen == core) return;
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);   // returns only on failure: go on with Prescott's kernels
}

void tuneAllocator() {
#if defined(__GLIBC__)
    if (std::getenv("GLIBC_TUNABLES") || std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
        std::getenv("MALLOC_TOP_PAD_"))
        return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 64 << 20);
#endif
}

std::string allocatorLibrary() {
    void* fn = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info{};
    if (!fn || !dladdr(fn, &info) || !info.dli_fname) return "";
    const std::string path = info.dli_fname;
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool cpuHasBf16() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;   // OSXSAVE: XCR0 readable
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const uint64_t xcr0 = (uint64_t(hi) << 32) | lo;
    const bool avx512State = (xcr0 & 0xE6) == 0xE6;             // SSE, AVX, opmask, ZMM state
    const bool tileState = (xcr0 & (3ull << 17)) == (3ull << 17);   // XTILECFG, XTILEDATA
    unsigned a7 = 0, b7 = 0, c7 = 0, d7 = 0;
    if (!__get_cpuid_count(7, 0, &a7, &b7, &c7, &d7)) return false;
    const bool amxBf16 = (d7 >> 22) & 1u;
    bool avx512Bf16 = false;
    if (a7 >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) avx512Bf16 = (a >> 5) & 1u;
    return (avx512Bf16 && avx512State) || (amxBf16 && tileState);
#else
    return false;
#endif
}

} // namespace glimpse
