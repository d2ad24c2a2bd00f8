#include "core/h5/walk.h"

#include "core/error.h"

namespace glimpse::h5 {

std::string objectKey(const Object& o) {
#if H5_VERSION_GE(1, 12, 0)
    H5O_info2_t info;
    o.check(H5Oget_info3(o.id(), &info, H5O_INFO_BASIC), "cannot read the object's identity");
    return std::string(reinterpret_cast<const char*>(&info.token), sizeof info.token);
#else
    H5O_info_t info;
    o.check(H5Oget_info2(o.id(), &info, H5O_INFO_BASIC), "cannot read the object's identity");
    return std::to_string(static_cast<unsigned long long>(info.addr));
#endif
}

WalkGuard::Entry WalkGuard::tryEnter(const Group& g) {
    if (int(stack_.size()) >= kMaxWalkDepth) return Entry::TooDeep;
    std::string key = objectKey(g);
    for (const auto& f : stack_)
        if (f.key == key) return Entry::Cycle;
    stack_.push_back({std::move(key), g.path()});
    return Entry::Ok;
}

void WalkGuard::enter(const Group& g) {
    switch (tryEnter(g)) {
    case Entry::Ok:
        return;
    case Entry::TooDeep:
        g.fail("groups nested deeper than " + std::to_string(kMaxWalkDepth) + " levels (a corrupt or crafted file)");
    case Entry::Cycle: {
        const std::string key = objectKey(g);
        std::string ancestor = "?";
        for (const auto& f : stack_)
            if (f.key == key) ancestor = f.path;
        g.fail("links back to its ancestor group '" + ancestor + "' (a cycle of hard links)");
    }
    }
}

} // namespace glimpse::h5
