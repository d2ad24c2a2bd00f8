#pragma once
// A small RAII layer over the HDF5 C API (libhdf5 1.10). Every handle is owned by an Id that
// closes it in its destructor; File, Group and Dataset are move-only. Every failure throws a
// glimpse::Error naming the file, the object path and what is wrong; HDF5's own error-stack
// printing is switched off (per thread, HDF5 is built thread-safe on Debian).
//
// Tensors are stored as plain datasets (little-endian): float32, float64, int8, int16, int32,
// int64 and uint8 as themselves; bool as uint8 with the attribute dtype = "bool". A 0-d tensor
// is a scalar dataset (compact: its value lives in the object header). h5py-written bool arrays
// (an 8-bit enum) read back as bool.
//
// Integrity (docs/integrity.md): writeTensor checksums every tensor by default (Fletcher-32 per
// chunk; scalars and string attributes are stored inside object headers, which carry a
// checksum in the format Glimpse writes), so a flipped bit fails the read with
// "<file>: dataset '<path>': checksum mismatch (the file is corrupt)".
//
// Every file Glimpse writes carries two root attributes: kind (string, e.g.
// "glimpse.checkpoint") and format_version (int64). openGlimpse() checks both.
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace glimpse::h5 {

// Owns one HDF5 identifier (file, group, dataset, attribute, dataspace, type, property list).
class Id {
public:
    using Closer = herr_t (*)(hid_t);
    Id() = default;
    Id(hid_t id, Closer closer) noexcept : id_(id), closer_(closer) {}
    Id(Id&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
    Id& operator=(Id&& o) noexcept;
    Id(const Id&) = delete;
    Id& operator=(const Id&) = delete;
    ~Id() { reset(); }

    hid_t get() const { return id_; }
    bool valid() const { return id_ >= 0; }
    void reset() noexcept;
    herr_t close() noexcept;   // like reset(), but returns the closer's status

private:
    hid_t id_ = H5I_INVALID_HID;
    Closer closer_ = nullptr;
};

// Turns HDF5's automatic error printing off for the calling thread (idempotent, cheap).
void silenceErrors();
// How many times a SWMR read re-reads a metadata block whose checksum fails before giving up
// (default 24: a live writer's torn block settles within that; HDF5 sleeps 1 ns, 2 ns, 4 ns, ...
// between tries, ~17 ms in all). Process-wide; applies to files opened afterwards. The fuzz
// targets lower it to 2: their inputs have no writer, so further tries re-read the same bytes
// and only sleep (they spent ~85% of their time asleep).
void setSwmrReadAttempts(unsigned attempts);
unsigned swmrReadAttempts();
// The innermost message of the calling thread's HDF5 error stack ("" when empty).
std::string lastErrorDetail();

// Names used in messages and by `glimpse info`: "float32", "int64", "bool", ...
std::string dtypeName(torch::ScalarType t);
std::string shapeString(const std::vector<int64_t>& shape);   // "[3,4]", "[]" for 0-d
std::string typeDescription(hid_t type);                         // any HDF5 type, e.g. "string"
// True for a relative object path of non-empty parts separated by single '/', none of them
// "." ("a", "layers/3/attn"): what tensor names with sub-groups may look like.
bool isValidRelativePath(const std::string& path);

// The largest dataset Dataset::read() loads into one tensor: 8 GiB. A larger declared shape is
// a corrupt or crafted file, not data (chunked datasets declare their extent for free).
constexpr int64_t kMaxReadBytes = int64_t(8) << 30;

enum class Compression {
    None,
    Gzip,   // chunked, shuffle + deflate
    Auto,   // Gzip for datasets of 1 MiB or more, None below
};
struct WriteOptions {
    Compression compression = Compression::None;
    int gzipLevel = 4;
    // Fletcher-32 checksum per chunk (HDF5's filter; readers verify it on every read, so a
    // flipped bit fails the read of that dataset). Needs chunked storage: non-empty, non-scalar
    // tensors are chunked for it; scalars are compact (checked with their object header).
    bool checksum = true;
};

// A file root, group or dataset: it knows its file name and path so errors can name both.
class Object {
public:
    hid_t id() const { return id_.get(); }
    const std::string& fileName() const { return file_; }
    const std::string& path() const { return path_; }   // "/" for the root

    bool hasAttr(const std::string& name) const;
    std::vector<std::string> attrNames() const;
    // Replaces an existing attribute of the same name (whatever its type).
    void setAttr(const std::string& name, int64_t value);
    void setAttr(const std::string& name, int value) { setAttr(name, int64_t(value)); }
    void setAttr(const std::string& name, double value);
    // UTF-8, fixed length (stored in the object header, so checksummed with it; h5py reads it
    // as bytes). Variable-length strings (h5py's default) are read too.
    void setAttr(const std::string& name, const std::string& value);
    void setAttr(const std::string& name, const char* value) { setAttr(name, std::string(value)); }
    // Throw when the attribute is missing or has the wrong type. attrDouble accepts integers;
    // attrString accepts fixed- and variable-length strings.
    int64_t attrInt(const std::string& name) const;
    double attrDouble(const std::string& name) const;
    std::string attrString(const std::string& name) const;
    std::string attrTypeDescription(const std::string& name) const;

    // Throws Error("<file>: <object> '<path>': <what>").
    [[noreturn]] void fail(const std::string& what) const;
    // Throws fail(what + HDF5 detail) when `status` < 0; returns it otherwise.
    int64_t check(int64_t status, const std::string& what) const;

protected:
    Object(Id id, std::string file, std::string path)
        : id_(std::move(id)), file_(std::move(file)), path_(std::move(path)) {}
    Object(Object&&) noexcept = default;
    Object& operator=(Object&&) noexcept = default;
    ~Object() = default;
    std::string childPath(const std::string& rel) const;   // absolute path of a relative one
    Id openAttr(const std::string& name) const;

    Id id_;
    std::string file_;
    std::string path_;
};

class Dataset : public Object {
public:
    Dataset(Id id, std::string file, std::string path)
        : Object(std::move(id), std::move(file), std::move(path)) {}

    std::vector<int64_t> shape() const;    // {} for a scalar dataset
    int64_t numElements() const;
    // The torch dtype this dataset reads as; throws for types tensors cannot hold.
    torch::ScalarType dtype() const;
    std::string typeDescription() const;   // for any dataset, also unsupported ones
    int64_t elementBytes() const;
    int64_t storageBytes() const;          // bytes on disk (after compression)

    // Refuses (Error naming file and dataset) a declared size over kMaxReadBytes before
    // allocating anything; shape() and numElements() refuse sizes no tensor can have.
    torch::Tensor read() const;
    // Checks dtype and shape first ("expected float32, file has int64", "expected [3,4],
    // file has [4,3]"); -1 in `shape` matches any size.
    torch::Tensor read(torch::ScalarType dtype) const;
    torch::Tensor read(torch::ScalarType dtype, const std::vector<int64_t>& shape) const;
};

class Group : public Object {
public:
    Group(Id id, std::string file, std::string path)
        : Object(std::move(id), std::move(file), std::move(path)) {}

    // Paths are relative to this group ("a/b/c"); a leading '/' starts at the file root.
    bool exists(const std::string& path) const;
    bool hasGroup(const std::string& path) const;
    bool hasDataset(const std::string& path) const;
    Group group(const std::string& path) const;       // throws "no group ..."
    Dataset dataset(const std::string& path) const;   // throws "no dataset ..."
    // Creates every missing group along the path; an existing group is returned as is.
    Group createGroup(const std::string& path);
    // Direct children, sorted by name.
    std::vector<std::string> children() const;
    std::vector<std::string> groupNames() const;
    std::vector<std::string> datasetNames() const;

    // Creates intermediate groups; throws if something already exists at `path`.
    Dataset writeTensor(const std::string& path, const torch::Tensor& t,
                        const WriteOptions& opts = {});
    torch::Tensor readTensor(const std::string& path) const { return dataset(path).read(); }
    torch::Tensor readTensor(const std::string& path, torch::ScalarType dtype,
                             const std::vector<int64_t>& shape) const {
        return dataset(path).read(dtype, shape);
    }
    // A dataset of any file type: `maxDims` entries of -1 are unlimited; `chunk` empty means
    // contiguous storage (then maxDims must equal dims); gzipLevel >= 0 adds shuffle + deflate;
    // checksum adds Fletcher-32 (chunked storage only).
    Dataset createDataset(const std::string& path, hid_t fileType, const std::vector<int64_t>& dims,
                          const std::vector<int64_t>& maxDims = {},
                          const std::vector<int64_t>& chunk = {}, int gzipLevel = -1, bool checksum = false);

private:
    enum class Type { None, Group, Dataset, Other };
    Type typeOf(const std::string& path) const;
    Dataset createCompact(const std::string& path, hid_t fileType);   // a scalar, in its header
};

class File : public Group {
public:
    enum class Mode {
        Read,       // read-only; falls back to SWMR-read for a file a SWMR writer holds open
        ReadWrite,
        SwmrRead,   // H5F_ACC_SWMR_READ: follow a file a SWMR writer is appending to
    };
    struct CreateOptions {
        bool latestFormat = false;   // H5F_LIBVER_LATEST (required for SWMR); else 1.8 format
    };

    // Errors: "file does not exist", "is a directory", "empty file", "not an HDF5 file",
    // "truncated or corrupt HDF5 file (...)".
    static File open(const std::string& path, Mode mode = Mode::Read);
    // Creates or truncates `path`. Errors name `nameInErrors` when given (atomic writes create
    // a temp file but report the file the user asked for).
    static File create(const std::string& path, CreateOptions opts, const std::string& nameInErrors = "");
    static File create(const std::string& path) { return create(path, CreateOptions{}); }

    hid_t fileId() const { return file_id_.get(); }
    void flush();
    // Closes every handle of this file now and reports failures (the destructor closes too,
    // silently).
    void close();

private:
    File(Id root, Id file, std::string name)
        : Group(std::move(root), std::move(name), "/"), file_id_(std::move(file)) {}
    Id file_id_;
};

// ---- Glimpse file header -----------------------------------------------------------------
struct Header {
    std::string kind;
    int64_t formatVersion = 0;
};
// nullopt when the root has no 'kind' attribute (a foreign HDF5 file).
std::optional<Header> readHeader(const File& f);
void writeHeader(File& f, const std::string& kind, int64_t formatVersion);
// Opens `path` and checks it is a `kind` file of format version 1..maxVersion. Errors:
// "x.h5 is not a Glimpse file (no 'kind' attribute)", "x.h5 is a glimpse.trace, expected a
// glimpse.checkpoint", "x.h5 has format version 3 of glimpse.trace; this Glimpse reads up to 1".
File openGlimpse(const std::string& path, const std::string& kind, int64_t maxVersion,
                 File::Mode mode = File::Mode::Read);

// Atomic write of a Glimpse file: creates `path.tmp-<pid>-<n>` with the header, calls
// write(file), closes, fsyncs and renames it over `path`. If anything throws, the temp file
// is removed and `path` is untouched. Always in the latest file format (opts.latestFormat is
// implied): its superblock, object headers and chunk indexes all carry checksums.
void writeAtomically(const std::string& path, const std::string& kind, int64_t formatVersion,
                     const std::function<void(File&)>& write,
                     File::CreateOptions opts = File::CreateOptions{});

} // namespace glimpse::h5
