#pragma once
// The body shared by the import targets: run an importer that writes the episode `out`; an
// import that succeeded must have written an episode the reader opens (else a finding).
#include <cstdio>
#include <string>

#include "core/replay/episode_reader.h"
#include "fuzz/fuzz_util.h"

namespace glimpse::fuzz {

template <class Import>
void importAndReadBack(const std::string& out, Import import) {
    bool imported = false;
    expectClearError([&] {
        import();
        imported = true;
    });
    if (!imported) return;
    try {
        replay::EpisodeReader r(out);
        if (r.length() > 0) (void)r.frame(r.length() - 1);
    } catch (const std::exception& e) {
        finding("imported episode does not read back", e.what());
    }
    std::remove(out.c_str());
}

} // namespace glimpse::fuzz
