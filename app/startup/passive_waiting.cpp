// Linked into every executable (glimpse, glimpse-headless, the tests) as the object library
// glimpse_startup, never into a static library: an entry of .preinit_array only takes effect
// in the executable itself. Plain C++, no LibTorch, no Qt, no C library state (it runs before
// the C library is initialized).
#include <unistd.h>

#include <cstddef>

namespace {

// The thread runtimes' waiting. libgomp (LibTorch's OpenMP) and OpenBLAS's pthread pool read
// their settings from the environment in their own constructors, which run before main(). By
// default both spin after each parallel region or product (libgomp for a while, OpenBLAS's
// workers for about 2^28 cycles calling sched_yield), and on a 2-core machine the spinning
// workers took the cores from the threads with work: 20 photo-recipe LETR training steps took
// 28-31 s of wall and 50-51 s of CPU time, 22-23 s and 26-28 s with OMP_WAIT_POLICY=PASSIVE and
// OPENBLAS_THREAD_TIMEOUT=4 (docs/performance.md, "Waiting threads"). So when either is unset,
// this function, in the executable's .preinit_array (run before every library's constructor),
// executes the program again at once with them added; values the user set are kept. A setenv() here
// would not do: the C library's own initialization, which runs after this, resets the
// environment to the one the process started with. The exec costs the dynamic loader's ~40 ms,
// not LibTorch's start-up, which has not happened yet. Setting GLIMPSE_KEEP_WAITING (any value) turns it off.
bool hasVar(char* const* envp, const char* name) {
    for (; *envp; ++envp) {
        const char* e = *envp;
        const char* n = name;
        while (*n && *e == *n) ++e, ++n;
        if (!*n && *e == '=') return true;
    }
    return false;
}

void passiveWaiting(int, char** argv, char** envp) {
    static char kOmp[] = "OMP_WAIT_POLICY=PASSIVE";
    static char kBlas[] = "OPENBLAS_THREAD_TIMEOUT=4";   // 2^4 cycles, OpenBLAS's least
    if (!argv || !envp || hasVar(envp, "GLIMPSE_KEEP_WAITING")) return;
    const bool omp = hasVar(envp, "OMP_WAIT_POLICY"), blas = hasVar(envp, "OPENBLAS_THREAD_TIMEOUT");
    if (omp && blas) return;
    size_t n = 0;
    while (envp[n]) ++n;
    char** env = static_cast<char**>(__builtin_alloca((n + 3) * sizeof(char*)));
    for (size_t i = 0; i < n; ++i) env[i] = envp[i];
    if (!omp) env[n++] = kOmp;
    if (!blas) env[n++] = kBlas;
    env[n] = nullptr;
    execve("/proc/self/exe", argv, env);   // returns only on failure: go on with the defaults
}
} // namespace

__attribute__((section(".preinit_array"), used)) static void (*glimpsePassiveWaiting)(int, char**, char**) =
    passiveWaiting;
