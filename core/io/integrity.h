#pragma once
// File integrity checks (docs/integrity.md): read every dataset of an HDF5 file so that every
// checksum in it is verified, report what carries a checksum, and rewrite a checkpoint written
// before checksums with them (tensors bit-identical).
#include <cstdint>
#include <string>
#include <vector>

namespace glimpse {

struct VerifyReport {
    int superblockVersion = 0;        // >= 2: superblock and object headers carry checksums
    int64_t datasets = 0;             // every dataset in the file
    int64_t checksummed = 0;          // chunked with Fletcher-32
    int64_t inHeader = 0;             // compact or empty: only the (checksummed) object header
    int64_t bytes = 0;                // raw data bytes read
    std::vector<std::string> unchecked;   // paths of datasets without a checksum on their data
    bool fullyChecked() const { return superblockVersion >= 2 && unchecked.empty(); }
};

// Opens `path` and reads every dataset in full (so HDF5 verifies every Fletcher-32 checksum and
// every metadata checksum on the way). Throws glimpse::Error naming the file and the dataset on
// corruption ("x.h5: dataset '/params/w': checksum mismatch (the file is corrupt; ...)").
VerifyReport verifyFile(const std::string& path);

// Loads the checkpoint `in` and saves it to `out` with the current writer (Fletcher-32 on every
// tensor, latest file format), then reloads `out` and checks family, config and every tensor
// (name, dtype, shape, bytes) are identical; throws and removes `out` if not. `in` == `out`
// replaces the file atomically.
void resaveCheckpoint(const std::string& in, const std::string& out);

} // namespace glimpse
