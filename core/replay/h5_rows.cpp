#include "core/replay/h5_rows.h"

#include <string>

namespace glimpse::replay {

void readRows(const h5::Dataset& ds, hid_t memType, int64_t first, int64_t count, void* out) {
    h5::silenceErrors();
    const std::vector<int64_t> shape = ds.shape();
    const std::string rows = count == 1 ? "row " + std::to_string(first)
                                        : "rows " + std::to_string(first) + ".." + std::to_string(first + count - 1);
    if (shape.empty() || first < 0 || count < 0 || first + count > shape[0])
        ds.fail("cannot read " + rows + ": the dataset has " + (shape.empty() ? std::string("no rows") : std::to_string(shape[0]) + " rows"));
    if (count == 0) return;
    std::vector<hsize_t> start(shape.size(), 0), cnt(shape.begin(), shape.end());
    start[0] = hsize_t(first);
    cnt[0] = hsize_t(count);
    h5::Id fspace(H5Dget_space(ds.id()), H5Sclose);
    ds.check(fspace.get(), "cannot read the dataspace");
    ds.check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr),
             "cannot select " + rows);
    h5::Id mspace(H5Screate_simple(int(cnt.size()), cnt.data(), nullptr), H5Sclose);
    ds.check(H5Dread(ds.id(), memType, mspace.get(), fspace.get(), H5P_DEFAULT, out),
             "cannot read " + rows + " (truncated or corrupt file?)");
}

} // namespace glimpse::replay
