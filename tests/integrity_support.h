#pragma once
// Bit-flip measurement for test_integrity: copies of a file with one seeded random bit flipped,
// each loaded in a forked child, classified as refused (an exception), unchanged (same content
// as the original: the flip hit unused bytes), silently different, or crashed (a signal, or
// no answer within 30 s).
#include <hdf5.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace glimpse::testing {

// FNV-1a over strings and tensor bytes (dtype and shape included).
class Digest {
public:
    Digest& add(const void* p, size_t n) {
        const auto* b = static_cast<const unsigned char*>(p);
        for (size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * 1099511628211ull;
        return *this;
    }
    Digest& add(const std::string& s) { return add(s.data(), s.size()).add("\0", 1); }
    Digest& add(const torch::Tensor& t) {
        if (!t.defined()) return add("<undefined>");
        add(std::string(c10::toString(t.scalar_type())));
        for (auto d : t.sizes()) add(&d, sizeof d);
        const torch::Tensor c = t.contiguous();
        return add(c.data_ptr(), c.nbytes());
    }
    std::string hex() const {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
        return buf;
    }

private:
    uint64_t h_ = 1469598103934665603ull;
};

// Byte ranges [begin, end) of the raw data of every chunked or contiguous dataset in an HDF5
// file (compact datasets live in their object header: metadata).
inline std::vector<std::pair<int64_t, int64_t>> rawDataRanges(const std::string& path) {
    std::vector<std::pair<int64_t, int64_t>> out;
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return out;
    H5Ovisit(
        f, H5_INDEX_NAME, H5_ITER_INC,
        [](hid_t root, const char* name, const H5O_info_t* info, void* op) -> herr_t {
            if (info->type != H5O_TYPE_DATASET) return 0;
            auto& ranges = *static_cast<std::vector<std::pair<int64_t, int64_t>>*>(op);
            hid_t ds = H5Dopen2(root, name, H5P_DEFAULT);
            hid_t dcpl = H5Dget_create_plist(ds);
            const H5D_layout_t layout = H5Pget_layout(dcpl);
            if (layout == H5D_CONTIGUOUS) {
                const haddr_t a = H5Dget_offset(ds);
                const hsize_t n = H5Dget_storage_size(ds);
                if (a != HADDR_UNDEF && n > 0) ranges.emplace_back(int64_t(a), int64_t(a + n));
            } else if (layout == H5D_CHUNKED) {
                hid_t space = H5Dget_space(ds);
                hsize_t count = 0;
                H5Dget_num_chunks(ds, space, &count);
                for (hsize_t i = 0; i < count; ++i) {
                    hsize_t offset[32];
                    unsigned mask = 0;
                    haddr_t addr = HADDR_UNDEF;
                    hsize_t size = 0;
                    if (H5Dget_chunk_info(ds, space, i, offset, &mask, &addr, &size) >= 0 && addr != HADDR_UNDEF)
                        ranges.emplace_back(int64_t(addr), int64_t(addr + size));
                }
                H5Sclose(space);
            }
            H5Pclose(dcpl);
            H5Dclose(ds);
            return 0;
        },
        &out);
    H5Fclose(f);
    return out;
}

// WholeFile: any byte; RawData: the chunks / contiguous data of datasets; Metadata: every
// byte outside the raw data (superblock, object headers, indexes, heaps, free space).
enum class FlipRegion { WholeFile, RawData, Metadata };

struct FlipStats {
    int copies = 0, refused = 0, unchanged = 0, silent = 0, crashed = 0;
    std::set<std::string> messages;   // a few distinct refusal messages
    std::vector<int64_t> silentAt;    // byte offsets of the flips that loaded with other values
};

// Loads `copy` with `digest` in a forked child. Returns 0 unchanged, 1 refused, 2 different,
// 3 crashed; `message` gets the exception text.
inline int loadInChild(const std::string& copy, const std::string& original,
                       const std::function<std::string(const std::string&)>& digest, std::string& message) {
    int fds[2];
    if (::pipe(fds) != 0) return 3;
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        ::alarm(30);
        int code = 0;
        std::string text;
        try {
            code = digest(copy) == original ? 0 : 2;
        } catch (const std::exception& e) {
            text = e.what();
            code = 1;
        }
        if (!text.empty() && ::write(fds[1], text.data(), std::min<size_t>(text.size(), 4000)) < 0) code = 3;
        ::_exit(code);
    }
    ::close(fds[1]);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) message.append(buf, size_t(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status)) return 3;
    return WEXITSTATUS(status) <= 2 ? WEXITSTATUS(status) : 3;
}

inline FlipStats flipBits(const std::string& path, const std::string& copyPath,
                          const std::function<std::string(const std::string&)>& digest, FlipRegion region,
                          int copies, uint64_t seed) {
    FlipStats s;
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string original = digest(path);
    std::vector<std::pair<int64_t, int64_t>> ranges;
    if (region == FlipRegion::WholeFile) ranges.emplace_back(0, int64_t(bytes.size()));
    else if (region == FlipRegion::RawData) ranges = rawDataRanges(path);
    else {
        auto data = rawDataRanges(path);
        std::sort(data.begin(), data.end());
        int64_t at = 0;
        for (const auto& r : data) {
            if (r.first > at) ranges.emplace_back(at, r.first);
            at = std::max(at, r.second);
        }
        if (at < int64_t(bytes.size())) ranges.emplace_back(at, int64_t(bytes.size()));
    }
    int64_t total = 0;
    for (const auto& r : ranges) total += r.second - r.first;
    if (total <= 0) return s;
    std::mt19937_64 rng(seed);
    for (int i = 0; i < copies; ++i) {
        int64_t k = std::uniform_int_distribution<int64_t>(0, total - 1)(rng);
        int64_t at = 0;
        for (const auto& r : ranges) {
            if (k < r.second - r.first) {
                at = r.first + k;
                break;
            }
            k -= r.second - r.first;
        }
        const int bit = int(std::uniform_int_distribution<int>(0, 7)(rng));
        std::string copy = bytes;
        copy[size_t(at)] = char(copy[size_t(at)] ^ (1 << bit));
        std::ofstream(copyPath, std::ios::binary | std::ios::trunc).write(copy.data(), std::streamsize(copy.size()));
        std::string message;
        ++s.copies;
        switch (loadInChild(copyPath, original, digest, message)) {
        case 0: ++s.unchanged; break;
        case 1:
            ++s.refused;
            if (s.messages.size() < 4) s.messages.insert(message);
            break;
        case 2:
            ++s.silent;
            s.silentAt.push_back(at * 8 + bit);
            // GLIMPSE_BITFLIP_KEEP=DIR keeps the original and each silently different copy.
            if (const char* keep = std::getenv("GLIMPSE_BITFLIP_KEEP")) {
                std::ofstream(std::string(keep) + "/original.h5", std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
                std::ofstream(std::string(keep) + "/silent-" + std::to_string(at) + ".h5", std::ios::binary)
                    .write(copy.data(), std::streamsize(copy.size()));
            }
            break;
        default: ++s.crashed; break;
        }
    }
    return s;
}

} // namespace glimpse::testing
