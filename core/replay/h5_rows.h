#pragma once
// Reading a run of rows (first dimension) of an HDF5 dataset through a hyperslab: what frame
// access and importers need without reading a whole dataset.
#include <cstdint>
#include <vector>

#include "core/h5/h5.h"

namespace glimpse::replay {

// Reads rows [first, first + count) of `ds` into `out` as `memType` (e.g. H5T_NATIVE_UINT8);
// out must hold count x (elements per row) values. Throws glimpse::Error naming the file, the
// dataset and the rows (e.g. a damaged or truncated chunk).
void readRows(const h5::Dataset& ds, hid_t memType, int64_t first, int64_t count, void* out);

} // namespace glimpse::replay
