#include "core/replay/frame_cache.h"

namespace glimpse::replay {

FrameCache::FrameCache(size_t capacityBytes) : capacity_(capacityBytes) {}

FramePtr FrameCache::get(int64_t step) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(step);
    if (it == index_.end()) {
        ++misses_;
        return nullptr;
    }
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second);
    return *it->second;
}

FramePtr FrameCache::peek(int64_t step) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(step);
    return it == index_.end() ? nullptr : *it->second;
}

void FrameCache::put(FramePtr frame) {
    if (!frame) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(frame->step);
    if (it != index_.end()) {
        bytes_ -= (*it->second)->bytes();
        lru_.erase(it->second);
        index_.erase(it);
    }
    if (frame->bytes() > capacity_) return;
    bytes_ += frame->bytes();
    lru_.push_front(std::move(frame));
    index_[lru_.front()->step] = lru_.begin();
    evictLocked();
}

void FrameCache::setCapacity(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = bytes;
    evictLocked();
}

void FrameCache::clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    lru_.clear();
    index_.clear();
    bytes_ = 0;
}

CacheStats FrameCache::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {hits_, misses_, evictions_, bytes_, capacity_, lru_.size()};
}

void FrameCache::evictLocked() {
    while (bytes_ > capacity_ && !lru_.empty()) {
        bytes_ -= lru_.back()->bytes();
        index_.erase(lru_.back()->step);
        lru_.pop_back();
        ++evictions_;
    }
}

} // namespace glimpse::replay
