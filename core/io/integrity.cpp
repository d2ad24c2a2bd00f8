#include "core/io/integrity.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <torch/torch.h>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/h5/walk.h"
#include "core/io/checkpoint.h"

namespace glimpse {

namespace {

bool hasFletcher(hid_t dcpl) {
    const int n = H5Pget_nfilters(dcpl);
    for (int i = 0; i < n; ++i) {
        unsigned flags = 0;
        size_t nelem = 0;
        unsigned config = 0;
        if (H5Pget_filter2(dcpl, unsigned(i), &flags, &nelem, nullptr, 0, nullptr, &config) == H5Z_FILTER_FLETCHER32)
            return true;
    }
    return false;
}

void verifyGroup(const h5::Group& g, VerifyReport& r, h5::WalkGuard& walk) {
    const h5::WalkGuard::Scope in(walk, g);
    for (const auto& name : g.children()) {
        if (g.hasGroup(name)) {
            verifyGroup(g.group(name), r, walk);
            continue;
        }
        if (!g.hasDataset(name)) continue;
        const h5::Dataset ds = g.dataset(name);
        ++r.datasets;
        h5::Id dcpl(H5Dget_create_plist(ds.id()), H5Pclose);
        ds.check(dcpl.get(), "cannot read the storage properties");
        const H5D_layout_t layout = H5Pget_layout(dcpl.get());
        const int64_t n = ds.numElements();
        if (layout == H5D_CHUNKED && hasFletcher(dcpl.get())) ++r.checksummed;
        else if (layout == H5D_COMPACT || n == 0) ++r.inHeader;
        else r.unchecked.push_back(ds.path());
        // Read in full: HDF5 verifies each chunk's checksum; the values are dropped. Any type
        // is read as raw bytes of its file size (strings, compounds and enums too).
        h5::Id type(H5Dget_type(ds.id()), H5Tclose);
        if (n > 0 && H5Tis_variable_str(type.get()) <= 0 && H5Tdetect_class(type.get(), H5T_VLEN) <= 0) {
            const int64_t bytes = n * int64_t(H5Tget_size(type.get()));
            if (bytes > h5::kMaxReadBytes) ds.fail("larger than " + std::to_string(h5::kMaxReadBytes >> 30) + " GiB");
            std::vector<char> buf(static_cast<size_t>(bytes));
            ds.check(H5Dread(ds.id(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), "cannot read the data");
            r.bytes += bytes;
        }
    }
}

bool sameCheckpoint(const Checkpoint& a, const Checkpoint& b, std::string& why) {
    if (a.family != b.family) why = "family differs";
    else if (a.configJson != b.configJson) why = "config differs";
    else if (a.tensors.size() != b.tensors.size()) why = "tensor count differs";
    for (auto ia = a.tensors.begin(), ib = b.tensors.begin(); why.empty() && ia != a.tensors.end(); ++ia, ++ib) {
        const torch::Tensor& x = ia->second;
        const torch::Tensor& y = ib->second;
        if (ia->first != ib->first) why = "tensor names differ: " + ia->first + " vs " + ib->first;
        else if (x.scalar_type() != y.scalar_type() || !x.sizes().equals(y.sizes()))
            why = "'" + ia->first + "' changed dtype or shape";
        else if (x.nbytes() != y.nbytes() ||
                 std::memcmp(x.contiguous().data_ptr(), y.contiguous().data_ptr(), x.nbytes()) != 0)
            why = "'" + ia->first + "' changed values";
    }
    return why.empty();
}

} // namespace

VerifyReport verifyFile(const std::string& path) {
    h5::File f = h5::File::open(path);
    VerifyReport r;
    H5F_info2_t info;
    f.check(H5Fget_info2(f.fileId(), &info), "cannot read the file's superblock");
    r.superblockVersion = int(info.super.version);
    h5::WalkGuard walk;
    verifyGroup(f, r, walk);
    return r;
}

void resaveCheckpoint(const std::string& in, const std::string& out) {
    const Checkpoint c = loadCheckpoint(in);
    // In place: write beside it, check, then rename over it (the original stays until then).
    const std::string target = out == in ? in + ".resave-" + std::to_string(::getpid()) : out;
    saveCheckpoint(target, c);
    Checkpoint back;
    std::string why;
    try {
        back = loadCheckpoint(target);
    } catch (const Error& e) {
        why = std::string("cannot be read back: ") + e.what();
    }
    if (why.empty() && sameCheckpoint(c, back, why)) {
        if (target != out && std::rename(target.c_str(), out.c_str()) != 0) {
            const std::string err = std::strerror(errno);
            std::remove(target.c_str());
            throw Error(out + ": cannot replace the file: " + err);
        }
        return;
    }
    std::remove(target.c_str());
    throw Error(out + ": the rewritten checkpoint differs from " + in + " (" + why + "); nothing was written");
}

} // namespace glimpse
