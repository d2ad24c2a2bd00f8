#pragma once
// Faults in the pages a vector is about to be written to, in one system call
// (madvise(MADV_POPULATE_WRITE), Linux 5.14+) instead of one page fault per 4 KiB page as the
// writes reach them. On this project's VMs each page fault is costly: filling 256 MB of fresh
// memory took 1.6-2.0 s page by page and 0.8 s populated first (docs/decisions.md, "Training
// view: the charts on screen of a million-row log"). Elsewhere, or when the kernel refuses,
// nothing happens and the writes fault as before.
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace glimpse {

// Populates the whole pages inside [p, p + bytes) for writing (partial pages at either end are
// left to fault: they may belong to other objects).
inline void prefaultForWrite(void* p, size_t bytes) {
#if defined(__linux__)
    constexpr int kPopulateWrite = 23;   // MADV_POPULATE_WRITE (older headers lack the name)
    static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t a = (uintptr_t(p) + page - 1) & ~(page - 1);
    const uintptr_t b = (uintptr_t(p) + bytes) & ~(page - 1);
    if (bytes >= 16 * page && b > a) (void)madvise(reinterpret_cast<void*>(a), b - a, kPopulateWrite);
#else
    (void)p;
    (void)bytes;
#endif
}

// The room of v from its size up to size + n elements (reserved, not yet written).
template <class T>
void prefaultAppend(std::vector<T>& v, size_t n) {
    if (v.capacity() - v.size() < n) v.reserve(v.size() + n);
    prefaultForWrite(v.data() + v.size(), n * sizeof(T));
}

} // namespace glimpse
