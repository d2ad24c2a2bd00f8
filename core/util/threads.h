#pragma once
// How many threads the compute core uses, and the process's run-time facts (BLAS kernels,
// allocator, bfloat16 instructions).
#include <string>

namespace glimpse {

// OpenBLAS's own thread pool (Debian's libopenblas0-pthread behind libblas.so.3), which
// torch::set_num_threads leaves alone: a process told to use one thread otherwise still runs
// its matrix products on every core, and on a busy machine such a process ran 3.7x slower
// (docs/distributed.md). The GUI sets 1: the inspector's attention maps are computed on the UI
// thread with a BLAS product, and on a busy machine waiting for OpenBLAS's helper threads
// stalled it for 5-15 ms, where one thread does it in 1-2 ms. Process-wide, so the trainers
// leave it to the command that owns the process. Returns false when the BLAS in use is not
// OpenBLAS (nothing to set).
bool setBlasThreads(int threads);

// LibTorch's intra-op threads and OpenBLAS's, both to `threads` (>= 1): for commands that own
// their process (glimpse train/infer/eval/bench with --threads or a config's "threads").
void setComputeThreads(int threads);

// OpenBLAS 0.3.21 (Debian 12's) chooses its kernels by CPU model when it loads, and processors
// newer than it (e.g. family 6 model 0xCF, which this project's machines report) fall back to
// its "Prescott" SSE3 kernels: float32 matrix products about 5x slower than its AVX-512 ones
// (docs/decisions.md, "OpenBLAS's kernels"). It reads OPENBLAS_CORETYPE only at load time, so
// when it reports Prescott on a CPU with AVX-512 (AVX2), this sets OPENBLAS_CORETYPE to SkylakeX
// (Haswell) and executes the program again with the same arguments; likewise when it reports
// Haswell or Zen on a CPU with AVX-512 (AMD EPYC Zen 4: float32 products 1.7x slower, one thread,
// docs/performance.md). Call it first in main().
// Does nothing when OPENBLAS_CORETYPE is already set, the BLAS is not OpenBLAS, or OpenBLAS
// chose another kernel; returns only then (or when the exec fails).
void chooseBlasKernels(char** argv);

// glibc's allocator, tuned for tensors: by default it maps every block of 128 KiB or more with
// mmap, unmaps it on free and gives the top of the heap back above 128 KiB, so each training
// step's activations (tens of MB) were mapped, page-faulted and zeroed anew: a third of a LETR
// training step on this project's CPU machines was spent in the kernel doing that. This keeps
// blocks up to 32 MiB in the heap, trims only above 256 MiB and grows it 64 MiB at a time
// (docs/performance.md, "The allocator"). Environment settings (GLIBC_TUNABLES, MALLOC_*_)
// win: nothing changes when one of them is set. Call it first in main().
void tuneAllocator();

// The file name of the shared library whose malloc this process uses (e.g.
// "libtcmalloc_minimal.so.4" when the executable links tcmalloc, "libc.so.6" for glibc's);
// empty when it cannot be told. Shown by `glimpse --version`.
std::string allocatorLibrary();

// True when the processor has bfloat16 instructions that oneDNN uses for convolutions
// (AVX512-BF16, or AMX-BF16) and the operating system saves their register state: then a
// bfloat16 backbone trains faster than a float32 one. Without them oneDNN emulates bfloat16,
// and a resnet10 step at 320 x 427 was 3.4x slower than float32 channels-last on such a
// machine (docs/decisions.md, "bfloat16 needs the instructions").
bool cpuHasBf16();

} // namespace glimpse
