#include "core/h5/h5.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include <torch/torch.h>

#include "core/error.h"
#include "core/io/atomic_file.h"

namespace glimpse::h5 {

namespace {

[[noreturn]] void raise(const std::string& file, const std::string& what) {
    throw Error(file + ": " + what);
}

// The first non-empty answer of `classify` over the calling thread's HDF5 error stack, innermost
// message first; "" when it answers "" for every message.
std::string firstOnErrorStack(std::string (*classify)(const std::string& desc)) {
    struct Walk {
        std::string (*classify)(const std::string&);
        std::string found;
    } walk{classify, {}};
    H5Ewalk2(
        H5E_DEFAULT, H5E_WALK_UPWARD,
        [](unsigned, const H5E_error2_t* e, void* out) -> herr_t {
            auto& w = *static_cast<Walk*>(out);
            if (w.found.empty() && e && e->desc) w.found = w.classify(e->desc);
            return 0;
        },
        &walk);
    return walk.found;
}

// What the calling thread's HDF5 error stack says about corruption: a failed Fletcher-32 check
// of raw data ("data error detected by Fletcher32 checksum"), a failed checksum of metadata
// (superblock, object header, chunk index: "incorrect metadata checksum ..."), or compressed
// data that does not inflate. "" when the stack reports none of these.
std::string corruptionOf() {
    return firstOnErrorStack([](const std::string& d) -> std::string {
        if (d.find("Fletcher32") != std::string::npos) return "checksum mismatch (the file is corrupt)";
        if (d.find("checksum") != std::string::npos) return "metadata checksum mismatch (the file is corrupt)";
        if (d.find("inflate() failed") != std::string::npos) return "compressed data is damaged (the file is corrupt)";
        return "";
    });
}

// The system error text of a failed read or write in the calling thread's HDF5 error stack
// ("File too large", "No space left on device"); "" when there is none.
std::string systemErrorOf() {
    return firstOnErrorStack([](const std::string& d) -> std::string {
        const auto at = d.find("error message = '");
        if (at == std::string::npos) return "";
        const auto end = d.find('\'', at + 17);
        return end == std::string::npos ? "" : d.substr(at + 17, end - at - 17);
    });
}

// `what`, and when HDF5 reported corruption, that first: "cannot read the data: checksum
// mismatch (the file is corrupt; HDF5: data error detected by Fletcher32 checksum)"; when a
// system call failed, its error: "cannot write the data: No space left on device".
std::string withDetail(const std::string& what) {
    const std::string d = lastErrorDetail();
    const std::string c = corruptionOf();
    if (!c.empty()) return what + ": " + c.substr(0, c.size() - 1) + "; HDF5: " + d + ")";
    const std::string sys = systemErrorOf();
    if (!sys.empty()) return what + ": " + sys;
    return d.empty() ? what : what + " (HDF5: " + d + ")";
}

std::vector<std::string> splitPath(const std::string& p) {
    std::vector<std::string> parts;
    size_t i = 0;
    while (i <= p.size()) {
        size_t j = p.find('/', i);
        if (j == std::string::npos) j = p.size();
        if (j > i) parts.push_back(p.substr(i, j - i));
        i = j + 1;
    }
    return parts;
}

std::string joinPath(bool absolute, const std::vector<std::string>& parts, size_t n) {
    std::string s = absolute ? "/" : "";
    for (size_t i = 0; i < n; ++i) s += (i ? "/" : "") + parts[i];
    return s.empty() ? "." : s;
}

bool isSignedInt(hid_t type) { return H5Tget_sign(type) == H5T_SGN_2; }

// IEEE 754 half precision, little-endian: the layout h5py and numpy use for float16.
// Created once and kept for the life of the process.
hid_t halfType() {
    static const hid_t t = [] {
        hid_t h = H5Tcopy(H5T_IEEE_F32LE);
        H5Tset_fields(h, 15, 10, 5, 0, 10);
        H5Tset_size(h, 2);
        H5Tset_ebias(h, 15);
        return h;
    }();
    return t;
}

// File type (little-endian) and native memory type for a tensor dtype; -1 when unsupported.
hid_t fileTypeFor(torch::ScalarType t) {
    switch (t) {
    case torch::kFloat16: return halfType();
    case torch::kFloat32: return H5T_IEEE_F32LE;
    case torch::kFloat64: return H5T_IEEE_F64LE;
    case torch::kInt8: return H5T_STD_I8LE;
    case torch::kInt16: return H5T_STD_I16LE;
    case torch::kInt32: return H5T_STD_I32LE;
    case torch::kInt64: return H5T_STD_I64LE;
    case torch::kUInt8:
    case torch::kBool: return H5T_STD_U8LE;
    default: return H5I_INVALID_HID;
    }
}
hid_t memTypeFor(torch::ScalarType t) {
    switch (t) {
    case torch::kFloat16: return halfType();
    case torch::kFloat32: return H5T_NATIVE_FLOAT;
    case torch::kFloat64: return H5T_NATIVE_DOUBLE;
    case torch::kInt8: return H5T_NATIVE_INT8;
    case torch::kInt16: return H5T_NATIVE_INT16;
    case torch::kInt32: return H5T_NATIVE_INT32;
    case torch::kInt64: return H5T_NATIVE_INT64;
    case torch::kUInt8:
    case torch::kBool: return H5T_NATIVE_UINT8;
    default: return H5I_INVALID_HID;
    }
}

const char* kSupported = "float16, float32, float64, int8, int16, int32, int64, uint8, bool";

bool isH5pyBool(hid_t type) {
    return H5Tget_class(type) == H5T_ENUM && H5Tget_size(type) == 1 && H5Tget_nmembers(type) == 2;
}

Id stringType(H5T_cset_t cset = H5T_CSET_UTF8) {
    Id t(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(t.get(), H5T_VARIABLE);
    H5Tset_cset(t.get(), cset);
    return t;
}

// HDF5 looks for its superblock signature at 0, 512, 1024, 2048, ... (after a user block).
bool hasHdf5Signature(const std::string& path, int64_t size) {
    static const char sig[8] = {'\211', 'H', 'D', 'F', '\r', '\n', '\032', '\n'};
    std::ifstream in(path, std::ios::binary);
    for (int64_t off = 0; off + 8 <= size; off = off ? off * 2 : 512) {
        char buf[8];
        in.seekg(off);
        if (!in.read(buf, 8)) return false;
        if (std::memcmp(buf, sig, 8) == 0) return true;
    }
    return false;
}

Id accessPlist(bool latest) {
    Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    // Strong close: closing the file closes every object of it, so the file is complete on
    // disk when close() returns (atomic writes rename right after).
    H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
    if (latest) H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    else H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST);
    return fapl;
}

} // namespace

// ---- Id ----------------------------------------------------------------------------------

Id& Id::operator=(Id&& o) noexcept {
    if (this != &o) {
        reset();
        id_ = o.id_;
        closer_ = o.closer_;
        o.id_ = H5I_INVALID_HID;
    }
    return *this;
}

void Id::reset() noexcept { close(); }

herr_t Id::close() noexcept {
    herr_t r = 0;
    // An id already closed by HDF5 is not closed again. Files are opened with the strong close
    // degree, so closing a file closes every object of it: a File's own root group (File's
    // implicit destructor closes the file member before the base Group's root), or a Group or
    // Dataset that outlives File::close(). Closing those again failed and left an error on
    // the thread's HDF5 error stack; in the thread-safe build that stack outlives a worker
    // thread and holds references to the error message ids, so H5close at exit could not
    // release them and printed "infinite loop closing library".
    if (id_ >= 0 && closer_) r = H5Iis_valid(id_) > 0 ? closer_(id_) : 0;
    id_ = H5I_INVALID_HID;
    return r;
}

// ---- errors and names --------------------------------------------------------------------

namespace {
std::atomic<unsigned> g_swmrReadAttempts{24};
}

void setSwmrReadAttempts(unsigned attempts) {
    g_swmrReadAttempts = std::max(1u, attempts);
}

unsigned swmrReadAttempts() {
    return g_swmrReadAttempts;
}

void silenceErrors() {
    thread_local bool done = false;
    if (!done) {
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
        done = true;
    }
}

std::string lastErrorDetail() {
    std::string detail;
    H5Ewalk2(
        H5E_DEFAULT, H5E_WALK_UPWARD,
        [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
            if (n == 0 && e && e->desc) *static_cast<std::string*>(out) = e->desc;
            return 0;
        },
        &detail);
    return detail;
}

std::string dtypeName(torch::ScalarType t) {
    switch (t) {
    case torch::kFloat32: return "float32";
    case torch::kFloat64: return "float64";
    case torch::kFloat16: return "float16";
    case torch::kBFloat16: return "bfloat16";
    case torch::kInt8: return "int8";
    case torch::kInt16: return "int16";
    case torch::kInt32: return "int32";
    case torch::kInt64: return "int64";
    case torch::kUInt8: return "uint8";
    case torch::kBool: return "bool";
    default: return c10::toString(t);
    }
}

std::string shapeString(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? "," : "") + (shape[i] < 0 ? std::string("*") : std::to_string(shape[i]));
    return s + "]";
}

std::string typeDescription(hid_t type) {
    const size_t size = H5Tget_size(type);
    switch (H5Tget_class(type)) {
    case H5T_INTEGER: return (isSignedInt(type) ? "int" : "uint") + std::to_string(8 * size);
    case H5T_FLOAT: return "float" + std::to_string(8 * size);
    case H5T_STRING:
        return H5Tis_variable_str(type) > 0 ? "string" : "string[" + std::to_string(size) + "]";
    case H5T_ENUM: return isH5pyBool(type) ? "bool (enum)" : "enum" + std::to_string(8 * size);
    case H5T_COMPOUND: {
        std::string s = "compound{";
        int n = H5Tget_nmembers(type);
        for (int i = 0; i < n; ++i) {
            char* name = H5Tget_member_name(type, unsigned(i));
            Id mt(H5Tget_member_type(type, unsigned(i)), H5Tclose);
            s += (i ? ", " : "") + std::string(name ? name : "?") + ": " + typeDescription(mt.get());
            H5free_memory(name);
        }
        return s + "}";
    }
    case H5T_ARRAY: return "array";
    case H5T_VLEN: return "vlen";
    case H5T_REFERENCE: return "reference";
    case H5T_OPAQUE: return "opaque";
    case H5T_BITFIELD: return "bitfield";
    case H5T_TIME: return "time";
    default: return "unknown type";
    }
}

bool isValidRelativePath(const std::string& path) {
    if (path.empty()) return false;
    for (size_t i = 0; i <= path.size();) {
        size_t j = path.find('/', i);
        if (j == std::string::npos) j = path.size();
        if (j == i || (j - i == 1 && path[i] == '.')) return false;
        i = j + 1;
    }
    return true;
}

// ---- Object ------------------------------------------------------------------------------

void Object::fail(const std::string& what) const {
    std::string label;
    if (path_ != "/") {
        label = H5Iget_type(id_.get()) == H5I_DATASET ? "dataset '" : "group '";
        label += path_ + "': ";
    }
    raise(file_, label + what);
}

int64_t Object::check(int64_t status, const std::string& what) const {
    if (status < 0) fail(withDetail(what));
    return status;
}

std::string Object::childPath(const std::string& rel) const {
    bool absolute = !rel.empty() && rel[0] == '/';
    auto parts = splitPath(absolute ? rel : path_ + "/" + rel);
    std::string s;
    for (const auto& p : parts) s += "/" + p;
    return s.empty() ? "/" : s;
}

bool Object::hasAttr(const std::string& name) const {
    silenceErrors();
    return check(H5Aexists(id(), name.c_str()), "cannot look up attribute '" + name + "'") > 0;
}

std::vector<std::string> Object::attrNames() const {
    silenceErrors();
    std::vector<std::string> names;
    check(H5Aiterate2(
              id(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
              [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
                  static_cast<std::vector<std::string>*>(out)->push_back(name);
                  return 0;
              },
              &names),
          "cannot list attributes");
    return names;
}

Id Object::openAttr(const std::string& name) const {
    if (!hasAttr(name)) fail("no attribute '" + name + "'");
    Id a(H5Aopen(id(), name.c_str(), H5P_DEFAULT), H5Aclose);
    check(a.get(), "cannot open attribute '" + name + "'");
    Id space(H5Aget_space(a.get()), H5Sclose);
    if (H5Sget_simple_extent_npoints(space.get()) != 1)
        fail("attribute '" + name + "' holds " +
             std::to_string(H5Sget_simple_extent_npoints(space.get())) + " values, expected one");
    return a;
}

namespace {
template <typename Write>
void replaceAttr(const Object& o, const std::string& name, hid_t fileType, Write write) {
    silenceErrors();
    if (o.hasAttr(name)) o.check(H5Adelete(o.id(), name.c_str()), "cannot replace attribute '" + name + "'");
    Id space(H5Screate(H5S_SCALAR), H5Sclose);
    Id a(H5Acreate2(o.id(), name.c_str(), fileType, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    o.check(a.get(), "cannot create attribute '" + name + "'");
    o.check(write(a.get()), "cannot write attribute '" + name + "'");
}
} // namespace

void Object::setAttr(const std::string& name, int64_t value) {
    replaceAttr(*this, name, H5T_STD_I64LE,
                [&](hid_t a) { return H5Awrite(a, H5T_NATIVE_INT64, &value); });
}

void Object::setAttr(const std::string& name, double value) {
    replaceAttr(*this, name, H5T_IEEE_F64LE,
                [&](hid_t a) { return H5Awrite(a, H5T_NATIVE_DOUBLE, &value); });
}

void Object::setAttr(const std::string& name, const std::string& value) {
    if (value.find('\0') != std::string::npos)
        fail("attribute '" + name + "': strings with NUL characters cannot be stored");
    // Fixed length: the bytes live in the attribute message inside the object header, which the
    // file format checksums (a variable-length string's bytes live in the unchecked global heap).
    Id type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), std::max<size_t>(1, value.size()));
    H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
    H5Tset_cset(type.get(), H5T_CSET_UTF8);
    std::string padded = value;
    padded.resize(std::max<size_t>(1, value.size()), '\0');
    replaceAttr(*this, name, type.get(), [&](hid_t a) { return H5Awrite(a, type.get(), padded.data()); });
}

std::string Object::attrTypeDescription(const std::string& name) const {
    Id a = openAttr(name);
    Id type(H5Aget_type(a.get()), H5Tclose);
    return typeDescription(type.get());
}

int64_t Object::attrInt(const std::string& name) const {
    Id a = openAttr(name);
    Id type(H5Aget_type(a.get()), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_INTEGER)
        fail("attribute '" + name + "' is " + typeDescription(type.get()) + ", expected an integer");
    int64_t v = 0;
    check(H5Aread(a.get(), H5T_NATIVE_INT64, &v), "cannot read attribute '" + name + "'");
    return v;
}

double Object::attrDouble(const std::string& name) const {
    Id a = openAttr(name);
    Id type(H5Aget_type(a.get()), H5Tclose);
    auto cls = H5Tget_class(type.get());
    if (cls != H5T_INTEGER && cls != H5T_FLOAT)
        fail("attribute '" + name + "' is " + typeDescription(type.get()) + ", expected a number");
    double v = 0;
    check(H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v), "cannot read attribute '" + name + "'");
    return v;
}

std::string Object::attrString(const std::string& name) const {
    Id a = openAttr(name);
    Id type(H5Aget_type(a.get()), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_STRING)
        fail("attribute '" + name + "' is " + typeDescription(type.get()) + ", expected a string");
    const H5T_cset_t cset = H5Tget_cset(type.get());
    if (H5Tis_variable_str(type.get()) > 0) {
        Id mem = stringType(cset);
        char* p = nullptr;
        check(H5Aread(a.get(), mem.get(), &p), "cannot read attribute '" + name + "'");
        std::string s = p ? p : "";
        H5free_memory(p);
        return s;
    }
    const size_t n = H5Tget_size(type.get());
    Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), n);
    H5Tset_cset(mem.get(), cset);
    H5Tset_strpad(mem.get(), H5Tget_strpad(type.get()));
    std::string s(n, '\0');
    check(H5Aread(a.get(), mem.get(), s.data()), "cannot read attribute '" + name + "'");
    s.resize(std::strlen(s.c_str()));
    if (H5Tget_strpad(type.get()) == H5T_STR_SPACEPAD)
        while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

// ---- Dataset -----------------------------------------------------------------------------

std::vector<int64_t> Dataset::shape() const {
    silenceErrors();
    Id space(H5Dget_space(id()), H5Sclose);
    check(space.get(), "cannot read the shape");
    int rank = int(check(H5Sget_simple_extent_ndims(space.get()), "cannot read the shape"));
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "cannot read the shape");
    std::vector<int64_t> out;
    for (hsize_t d : dims) {
        if (d > hsize_t(std::numeric_limits<int64_t>::max()))
            fail("declares a dimension of " + std::to_string(d) + " elements, more than a tensor can have (corrupt file?)");
        out.push_back(int64_t(d));
    }
    return out;
}

int64_t Dataset::numElements() const {
    const auto sh = shape();
    int64_t n = 1;
    for (auto d : sh)
        if (__builtin_mul_overflow(n, d, &n))
            fail("declares shape " + shapeString(sh) + ", more than 2^63 elements (corrupt file?)");
    return n;
}

std::string Dataset::typeDescription() const {
    silenceErrors();
    Id type(H5Dget_type(id()), H5Tclose);
    check(type.get(), "cannot read the element type");
    std::string s = h5::typeDescription(type.get());
    if (s == "uint8" && hasAttr("dtype") && attrString("dtype") == "bool") return "bool";
    return s;
}

int64_t Dataset::elementBytes() const {
    Id type(H5Dget_type(id()), H5Tclose);
    return int64_t(H5Tget_size(type.get()));
}

int64_t Dataset::storageBytes() const { return int64_t(H5Dget_storage_size(id())); }

torch::ScalarType Dataset::dtype() const {
    silenceErrors();
    Id type(H5Dget_type(id()), H5Tclose);
    check(type.get(), "cannot read the element type");
    const size_t size = H5Tget_size(type.get());
    switch (H5Tget_class(type.get())) {
    case H5T_FLOAT:
        if (size == 2) return torch::kFloat16;
        if (size == 4) return torch::kFloat32;
        if (size == 8) return torch::kFloat64;
        break;
    case H5T_INTEGER:
        if (isSignedInt(type.get())) {
            if (size == 1) return torch::kInt8;
            if (size == 2) return torch::kInt16;
            if (size == 4) return torch::kInt32;
            if (size == 8) return torch::kInt64;
        } else if (size == 1) {
            return hasAttr("dtype") && attrString("dtype") == "bool" ? torch::kBool : torch::kUInt8;
        }
        break;
    case H5T_ENUM:
        if (isH5pyBool(type.get())) return torch::kBool;
        break;
    default: break;
    }
    fail("element type " + h5::typeDescription(type.get()) +
         " cannot be read as a tensor (supported: " + kSupported + ")");
}

torch::Tensor Dataset::read() const {
    silenceErrors();
    const auto dt = dtype();
    const auto sh = shape();
    const bool isBool = dt == torch::kBool;
    // A file can declare any shape (a chunked dataset with nothing written takes no disk):
    // refuse what cannot be a real tensor before allocating it.
    const int64_t elementSize = int64_t(c10::elementSize(isBool ? torch::kUInt8 : dt));
    if (numElements() > kMaxReadBytes / elementSize)
        fail("declares shape " + shapeString(sh) + " of " + dtypeName(dt) + ", more than the " +
             std::to_string(kMaxReadBytes >> 30) + " GiB Glimpse reads into one tensor (corrupt file?)");
    torch::Tensor t = torch::empty(sh, torch::TensorOptions().dtype(isBool ? torch::kUInt8 : dt));
    if (t.numel() > 0) {
        Id type(H5Dget_type(id()), H5Tclose);
        Id mem = H5Tget_class(type.get()) == H5T_ENUM
                     ? Id(H5Tget_native_type(type.get(), H5T_DIR_ASCEND), H5Tclose)
                     : Id(H5Tcopy(memTypeFor(dt)), H5Tclose);
        if (H5Dread(id(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr()) < 0) {
            const std::string c = corruptionOf();
            if (!c.empty()) fail(c.substr(0, c.size() - 1) + "; HDF5: " + lastErrorDetail() + ")");
            fail(withDetail("cannot read the data (truncated or corrupt file)"));
        }
    }
    return isBool ? t.ne(0) : t;
}

torch::Tensor Dataset::read(torch::ScalarType expected) const {
    const auto dt = dtype();
    if (dt != expected) fail("expected " + dtypeName(expected) + ", file has " + dtypeName(dt));
    return read();
}

torch::Tensor Dataset::read(torch::ScalarType expected, const std::vector<int64_t>& shape) const {
    const auto dt = dtype();
    if (dt != expected) fail("expected " + dtypeName(expected) + ", file has " + dtypeName(dt));
    const auto sh = this->shape();
    bool ok = sh.size() == shape.size();
    for (size_t i = 0; ok && i < sh.size(); ++i) ok = shape[i] < 0 || shape[i] == sh[i];
    if (!ok) fail("expected shape " + shapeString(shape) + ", file has " + shapeString(sh));
    return read();
}

// ---- Group -------------------------------------------------------------------------------

Group::Type Group::typeOf(const std::string& path) const {
    silenceErrors();
    const bool absolute = !path.empty() && path[0] == '/';
    const auto parts = splitPath(path);
    if (parts.empty()) return Type::Group;
    for (size_t n = 1; n <= parts.size(); ++n) {
        if (parts[n - 1] == ".") fail("invalid name '" + path + "' ('.' is not a name)");
        htri_t e = H5Lexists(id(), joinPath(absolute, parts, n).c_str(), H5P_DEFAULT);
        if (e < 0) raise(file_, withDetail("cannot look up '" + childPath(joinPath(absolute, parts, n)) + "'"));
        if (e == 0) return Type::None;
    }
    const std::string full = joinPath(absolute, parts, parts.size());
    Id obj(H5Oopen(id(), full.c_str(), H5P_DEFAULT), H5Oclose);
    if (!obj.valid()) {
        // A dangling soft or external link is no object; a hard link whose object does not
        // open is a damaged file (e.g. a flipped bit in an object header's signature or version,
        // which HDF5 decodes before it verifies the header's checksum).
        const bool checksum = !corruptionOf().empty();
        const std::string what = withDetail("cannot open '" + childPath(path) + "'" +
                                            (checksum ? "" : ": damaged object header (the file is corrupt)"));
        H5L_info_t link;
        if (H5Lget_info(id(), full.c_str(), &link, H5P_DEFAULT) >= 0 && link.type != H5L_TYPE_HARD) return Type::None;
        raise(file_, what);
    }
    switch (H5Iget_type(obj.get())) {
    case H5I_GROUP: return Type::Group;
    case H5I_DATASET: return Type::Dataset;
    default: return Type::Other;
    }
}

bool Group::exists(const std::string& path) const { return typeOf(path) != Type::None; }
bool Group::hasGroup(const std::string& path) const { return typeOf(path) == Type::Group; }
bool Group::hasDataset(const std::string& path) const { return typeOf(path) == Type::Dataset; }

Group Group::group(const std::string& path) const {
    const std::string abs = childPath(path);
    switch (typeOf(path)) {
    case Type::None: raise(file_, "no group '" + abs + "'");
    case Type::Dataset: raise(file_, "'" + abs + "' is a dataset, expected a group");
    case Type::Other: raise(file_, "'" + abs + "' is not a group");
    case Type::Group: break;
    }
    Id g(H5Gopen2(id(), path.empty() ? "." : path.c_str(), H5P_DEFAULT), H5Gclose);
    if (!g.valid()) raise(file_, withDetail("cannot open group '" + abs + "'"));
    return Group(std::move(g), file_, abs);
}

Dataset Group::dataset(const std::string& path) const {
    const std::string abs = childPath(path);
    switch (typeOf(path)) {
    case Type::None: raise(file_, "no dataset '" + abs + "'");
    case Type::Group: raise(file_, "'" + abs + "' is a group, expected a dataset");
    case Type::Other: raise(file_, "'" + abs + "' is not a dataset");
    case Type::Dataset: break;
    }
    Id d(H5Dopen2(id(), path.c_str(), H5P_DEFAULT), H5Dclose);
    if (!d.valid()) raise(file_, withDetail("cannot open dataset '" + abs + "'"));
    return Dataset(std::move(d), file_, abs);
}

Group Group::createGroup(const std::string& path) {
    silenceErrors();
    const bool absolute = !path.empty() && path[0] == '/';
    const auto parts = splitPath(path);
    for (size_t n = 1; n <= parts.size(); ++n) {
        const std::string sub = joinPath(absolute, parts, n);
        switch (typeOf(sub)) {
        case Type::Group: break;
        case Type::None: {
            Id g(H5Gcreate2(id(), sub.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
            if (!g.valid()) raise(file_, withDetail("cannot create group '" + childPath(sub) + "'"));
            break;
        }
        default: raise(file_, "cannot create group '" + childPath(sub) + "': a dataset is in the way");
        }
    }
    return group(path);
}

std::vector<std::string> Group::children() const {
    silenceErrors();
    // One pass in the native order, then sorted by name. Not H5Lget_name_by_idx: for a group in
    // dense storage HDF5 1.10 builds a sorted link table per call, and on a corrupt link heap it
    // frees that table's uninitialized entries (a crash inside libhdf5 that the fuzzers found,
    // docs/fuzzing.md); native-order iteration walks the B-tree without the table.
    std::vector<std::string> names;
    const auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
        static_cast<std::vector<std::string>*>(out)->emplace_back(name);
        return 0;
    };
    check(H5Literate(id(), H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect, &names), "cannot list the group");
    std::sort(names.begin(), names.end());
    return names;
}

std::vector<std::string> Group::groupNames() const {
    std::vector<std::string> out;
    for (auto& n : children())
        if (typeOf(n) == Type::Group) out.push_back(n);
    return out;
}

std::vector<std::string> Group::datasetNames() const {
    std::vector<std::string> out;
    for (auto& n : children())
        if (typeOf(n) == Type::Dataset) out.push_back(n);
    return out;
}

Dataset Group::createDataset(const std::string& path, hid_t fileType, const std::vector<int64_t>& dims,
                             const std::vector<int64_t>& maxDims, const std::vector<int64_t>& chunk,
                             int gzipLevel, bool checksum) {
    silenceErrors();
    const std::string abs = childPath(path);
    if (exists(path)) raise(file_, "cannot create dataset '" + abs + "': it already exists");
    const auto slash = path.find_last_of('/');
    if (slash != std::string::npos && slash > 0) createGroup(path.substr(0, slash));

    std::vector<hsize_t> d(dims.begin(), dims.end()), m(d);
    for (size_t i = 0; i < maxDims.size() && i < m.size(); ++i)
        m[i] = maxDims[i] < 0 ? H5S_UNLIMITED : hsize_t(maxDims[i]);
    Id space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(d.size()), d.data(), m.data()),
             H5Sclose);
    if (!space.valid()) raise(file_, withDetail("cannot create dataset '" + abs + "': bad shape " + shapeString(dims)));
    Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    if (!chunk.empty()) {
        std::vector<hsize_t> c(chunk.begin(), chunk.end());
        H5Pset_chunk(dcpl.get(), int(c.size()), c.data());
        if (gzipLevel >= 0) {
            H5Pset_shuffle(dcpl.get());
            H5Pset_deflate(dcpl.get(), unsigned(std::min(gzipLevel, 9)));
        }
        if (checksum) H5Pset_fletcher32(dcpl.get());
    }
    Id ds(H5Dcreate2(id(), path.c_str(), fileType, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
          H5Dclose);
    if (!ds.valid()) raise(file_, withDetail("cannot create dataset '" + abs + "'"));
    return Dataset(std::move(ds), file_, abs);
}

// A scalar dataset with compact layout: its value is stored in the object header, which the
// file format checksums (Fletcher-32 needs chunks, and a 0-d dataset cannot be chunked).
Dataset Group::createCompact(const std::string& path, hid_t fileType) {
    silenceErrors();
    const std::string abs = childPath(path);
    if (exists(path)) raise(file_, "cannot create dataset '" + abs + "': it already exists");
    const auto slash = path.find_last_of('/');
    if (slash != std::string::npos && slash > 0) createGroup(path.substr(0, slash));
    Id space(H5Screate(H5S_SCALAR), H5Sclose);
    Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_layout(dcpl.get(), H5D_COMPACT);
    Id ds(H5Dcreate2(id(), path.c_str(), fileType, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
    if (!ds.valid()) raise(file_, withDetail("cannot create dataset '" + abs + "'"));
    return Dataset(std::move(ds), file_, abs);
}

Dataset Group::writeTensor(const std::string& path, const torch::Tensor& tensor, const WriteOptions& opts) {
    if (!tensor.defined()) raise(file_, "cannot write an undefined tensor to '" + childPath(path) + "'");
    const bool isBool = tensor.scalar_type() == torch::kBool;
    torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    if (isBool) t = t.to(torch::kUInt8);
    const hid_t ft = fileTypeFor(t.scalar_type());
    if (ft < 0)
        raise(file_, "cannot write tensor '" + childPath(path) + "' of dtype " + dtypeName(t.scalar_type()) +
                         " (supported: " + kSupported + ")");
    const std::vector<int64_t> dims(t.sizes().begin(), t.sizes().end());
    const int64_t bytes = int64_t(t.nbytes());
    const bool gzip = t.dim() > 0 && t.numel() > 0 &&
                      (opts.compression == Compression::Gzip ||
                       (opts.compression == Compression::Auto && bytes >= (int64_t(1) << 20)));
    const bool checksum = opts.checksum && t.dim() > 0 && t.numel() > 0;
    std::vector<int64_t> chunk;
    if (gzip || checksum) {
        // Chunks of at most ~1 MiB: halve the leading dimensions until it fits.
        chunk = dims;
        const int64_t elem = int64_t(t.element_size());
        auto chunkBytes = [&] {
            int64_t n = elem;
            for (auto c : chunk) n *= c;
            return n;
        };
        for (size_t i = 0; i < chunk.size() && chunkBytes() > (int64_t(1) << 20); ++i)
            while (chunk[i] > 1 && chunkBytes() > (int64_t(1) << 20)) chunk[i] = (chunk[i] + 1) / 2;
    }
    Dataset ds = t.dim() == 0 ? createCompact(path, ft) : createDataset(path, ft, dims, dims, chunk, gzip ? opts.gzipLevel : -1, checksum);
    if (t.numel() > 0)
        ds.check(H5Dwrite(ds.id(), memTypeFor(t.scalar_type()), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr()),
                 "cannot write the data");
    if (isBool) ds.setAttr("dtype", "bool");
    return ds;
}

// ---- File --------------------------------------------------------------------------------

File File::open(const std::string& path, Mode mode) {
    silenceErrors();
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
        raise(path, errno == ENOENT ? "file does not exist" : std::string("cannot open: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) raise(path, "is a directory, not an HDF5 file");
    if (::access(path.c_str(), mode == Mode::ReadWrite ? R_OK | W_OK : R_OK) != 0)
        raise(path, std::string("cannot open: ") + std::strerror(errno));
    if (st.st_size == 0) raise(path, "empty file (0 bytes), not an HDF5 file");
    if (!hasHdf5Signature(path, st.st_size)) raise(path, "not an HDF5 file");

    Id fapl = accessPlist(false);
    // SWMR reads retry a metadata block whose checksum fails, sleeping 1 ns, 2 ns, 4 ns, ...
    // between tries; HDF5's default of 100 tries makes a corrupt file hang for ages (fuzz
    // finding, docs/fuzzing.md). 24 tries wait at most ~17 ms in all for a writer's torn block.
    H5Pset_metadata_read_attempts(fapl.get(), swmrReadAttempts());
    unsigned flags = mode == Mode::ReadWrite ? H5F_ACC_RDWR
                     : mode == Mode::SwmrRead ? (H5F_ACC_RDONLY | H5F_ACC_SWMR_READ)
                                              : H5F_ACC_RDONLY;
    Id f(H5Fopen(path.c_str(), flags, fapl.get()), H5Fclose);
    std::string detail = lastErrorDetail();
    const std::string corruption = corruptionOf();
    // A file a SWMR writer holds open (a live run log, or one whose writer was killed) has its
    // superblock's "open for write" flag set: a plain read-only open refuses it with this
    // message and a SWMR read works. Any other failure is not retried that way: a SWMR open of
    // a corrupt file spends its metadata read attempts (~17 ms) before failing the same way.
    if (!f.valid() && mode == Mode::Read && detail.find("already open for") != std::string::npos)
        f = Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl.get()), H5Fclose);
    if (!f.valid()) {
        const std::string what = !corruption.empty()           ? corruption
                                 : mode == Mode::ReadWrite ? "cannot open the HDF5 file for writing"
                                                           : "truncated or corrupt HDF5 file";
        raise(path, detail.empty() ? what : what + " (HDF5: " + detail + ")");
    }
    Id root(H5Gopen2(f.get(), "/", H5P_DEFAULT), H5Gclose);
    if (!root.valid()) raise(path, withDetail("corrupt HDF5 file: cannot open the root group"));
    return File(std::move(root), std::move(f), path);
}

File File::create(const std::string& path, CreateOptions opts, const std::string& nameInErrors) {
    silenceErrors();
    const std::string& name = nameInErrors.empty() ? path : nameInErrors;
    Id fapl = accessPlist(opts.latestFormat);
    Id f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
    if (!f.valid()) raise(name, withDetail("cannot create the HDF5 file"));
    Id root(H5Gopen2(f.get(), "/", H5P_DEFAULT), H5Gclose);
    if (!root.valid()) raise(name, withDetail("cannot open the root group"));
    return File(std::move(root), std::move(f), name);
}

void File::flush() {
    silenceErrors();
    check(H5Fflush(fileId(), H5F_SCOPE_GLOBAL), "cannot flush the file to disk");
}

void File::close() {
    silenceErrors();
    id_.reset();
    if (file_id_.valid() && file_id_.close() < 0)
        raise(file_, withDetail("cannot close the file (data may not have been written)"));
}

// ---- Glimpse header ----------------------------------------------------------------------

std::optional<Header> readHeader(const File& f) {
    if (!f.hasAttr("kind")) return std::nullopt;
    Header h;
    h.kind = f.attrString("kind");
    if (!f.hasAttr("format_version"))
        raise(f.fileName(), "is a " + h.kind + " without a 'format_version' attribute");
    h.formatVersion = f.attrInt("format_version");
    return h;
}

void writeHeader(File& f, const std::string& kind, int64_t formatVersion) {
    f.setAttr("kind", kind);
    f.setAttr("format_version", formatVersion);
}

File openGlimpse(const std::string& path, const std::string& kind, int64_t maxVersion, File::Mode mode) {
    File f = File::open(path, mode);
    const auto h = readHeader(f);
    if (!h) throw Error(path + " is not a Glimpse file (no 'kind' attribute); expected a " + kind);
    if (h->kind != kind) throw Error(path + " is a " + h->kind + ", expected a " + kind);
    if (h->formatVersion < 1)
        throw Error(path + ": invalid format_version " + std::to_string(h->formatVersion) + " of " + kind);
    if (h->formatVersion > maxVersion)
        throw Error(path + " has format version " + std::to_string(h->formatVersion) + " of " + kind +
                    "; this Glimpse reads versions up to " + std::to_string(maxVersion) +
                    " (the file was written by a newer Glimpse)");
    return f;
}

void writeAtomically(const std::string& path, const std::string& kind, int64_t formatVersion,
                     const std::function<void(File&)>& write, File::CreateOptions opts) {
    // The latest format: superblock v3, version 2 object headers and the 1.10 chunk indexes,
    // every one with a checksum (docs/integrity.md).
    opts.latestFormat = true;
    writeFileAtomically(path, [&](const std::string& tmp) {
        File f = File::create(tmp, opts, path);
        writeHeader(f, kind, formatVersion);
        write(f);
        f.close();
    });
}

} // namespace glimpse::h5
