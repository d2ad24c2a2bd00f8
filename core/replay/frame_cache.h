#pragma once
// A memory-bounded LRU cache of decoded episode frames, safe to use from several threads (a GUI
// worker prefetching while the UI thread asks). Frames are shared_ptr<const Frame>: a frame
// handed out stays valid after the cache evicts it.
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace glimpse::replay {

// One frame: H x W x C bytes, row-major, channels interleaved (RGB, or grey when C = 1).
struct Frame {
    int64_t step = 0;
    int64_t height = 0, width = 0, channels = 0;
    std::vector<uint8_t> pixels;

    size_t bytes() const { return pixels.size() + sizeof(Frame); }
    const uint8_t* pixel(int64_t y, int64_t x) const { return pixels.data() + (y * width + x) * channels; }
};
using FramePtr = std::shared_ptr<const Frame>;

struct CacheStats {
    int64_t hits = 0, misses = 0, evictions = 0;
    size_t bytes = 0, capacity = 0, frames = 0;
};

class FrameCache {
public:
    explicit FrameCache(size_t capacityBytes);

    // The frame of `step`, marked most recently used; nullptr (a counted miss) when absent.
    FramePtr get(int64_t step);
    // Like get() but neither counts nor reorders: for "is it there yet?" checks.
    FramePtr peek(int64_t step) const;
    // Inserts (or replaces) a frame, then evicts least recently used frames until the cache
    // holds at most `capacity` bytes. A frame larger than the capacity is not kept.
    void put(FramePtr frame);
    void setCapacity(size_t bytes);
    void clear();
    CacheStats stats() const;

private:
    void evictLocked();

    mutable std::mutex mutex_;
    size_t capacity_ = 0, bytes_ = 0;
    int64_t hits_ = 0, misses_ = 0, evictions_ = 0;
    std::list<FramePtr> lru_;   // front: most recently used
    std::unordered_map<int64_t, std::list<FramePtr>::iterator> index_;
};

} // namespace glimpse::replay
