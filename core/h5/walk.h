#pragma once
// Guard for recursive walks over an HDF5 group tree. HDF5 allows hard links to any group, so a
// file (crafted, corrupt, or simply written that way) can link a group to one of its ancestors;
// a naive recursive walk then never ends and overflows the stack. Every reader that recurses
// into sub-groups keeps a WalkGuard: enter() refuses a group that is already on the current
// path (a cycle) or a path deeper than kMaxWalkDepth, leave() pops it (Scope does both).
#include <cstdint>
#include <string>
#include <vector>

#include "core/h5/h5.h"

namespace glimpse::h5 {

constexpr int kMaxWalkDepth = 64;

// The file-unique identity of the object (its header address), for cycle checks.
std::string objectKey(const Object& o);

class WalkGuard {
public:
    enum class Entry { Ok, Cycle, TooDeep };
    // Pushes `g` unless it is already on the path or the path is kMaxWalkDepth groups deep.
    Entry tryEnter(const Group& g);
    // Like tryEnter, but throws an Error naming the file and the group ("group '/a/b' links back
    // to its ancestor '/' (a cycle of hard links)", "groups nested deeper than 64 levels").
    void enter(const Group& g);
    void leave() { stack_.pop_back(); }

    // RAII: enter() now, leave() at the end of the scope.
    class Scope {
    public:
        Scope(WalkGuard& w, const Group& g) : w_(w) { w_.enter(g); }
        ~Scope() { w_.leave(); }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        WalkGuard& w_;
    };

private:
    struct Frame {
        std::string key, path;
    };
    std::vector<Frame> stack_;
};

} // namespace glimpse::h5
